package replicate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalidDestination is wrapped by every refusal of a replicate
// destination (an object key) or of an alias prefix. The detail names the
// rule and, bounded, the part of the key that broke it; it is the command's
// own text, never a credential.
var ErrInvalidDestination = errors.New("replicate: invalid destination")

// MaxObjectKeyBytes bounds a joined object key: GCS refuses longer names,
// and refusing here keeps the refusal ahead of any credential.
const MaxObjectKeyBytes = 1024

// CheckDestination reports whether destination is a usable rendered object
// key, relative to an alias's root. It refuses, and never repairs:
//
//   - any '%' (a rendered key carries no escapes, and decoding would let
//     "%2F" become a separator);
//   - an empty or all-white-space key, and white space at either end;
//   - a leading '/' (absolute) or a trailing '/';
//   - a '\';
//   - a drive qualifier ("C:" at the start);
//   - an empty segment ("a//b"), and "." and ".." segments;
//   - in a segment, any byte but A-Z a-z 0-9 and ._-+=@,()[]~ and space, so
//     braces (an unrendered template), NUL, control characters and
//     non-ASCII are refused too.
//
// The rules run in that order and the first broken one is reported. The
// error wraps ErrInvalidDestination.
func CheckDestination(destination string) error {
	if strings.IndexByte(destination, '%') >= 0 {
		return destinationError("destination carries percent-encoding; send the rendered path")
	}
	why := whyBadDestination(destination)
	if why == "" {
		return nil
	}
	return destinationError("destination is not a usable key: " + why)
}

func whyBadDestination(s string) string {
	trimmed := strings.TrimFunc(s, isSpace)
	switch {
	case trimmed == "":
		return "it is empty"
	case trimmed != s:
		return "it has leading or trailing white space"
	case s[0] == '/':
		return "it is absolute"
	case s[len(s)-1] == '/':
		return "it ends with a separator"
	case strings.IndexByte(s, '\\') >= 0:
		return "it contains a backslash"
	case len(s) >= 2 && isLetter(s[0]) && s[1] == ':':
		return "it carries a drive qualifier"
	}
	for seg := range strings.SplitSeq(s, "/") {
		switch seg {
		case "":
			return "it has an empty segment"
		case ".", "..":
			return "it has a relative segment"
		}
		if bad := disallowed(seg); bad != "" {
			return "segment " + quoteBounded(seg) + " has disallowed characters " + strconv.Quote(bad)
		}
	}
	return ""
}

// ObjectKey is the key a destination is written at under an alias's prefix:
// prefix + "/" + destination, or destination alone when the prefix is
// empty. It is the one place the root is applied, so a caller cannot check
// one key and write another.
//
// The prefix is operator configuration: slashes at its ends are dropped,
// and it must pass CheckPrefix. The destination must pass CheckDestination,
// and the joined key may hold at most MaxObjectKeyBytes bytes. Because a
// destination never starts with '/' and has no "." or ".." segment, every
// key ObjectKey returns lies under the prefix. Errors wrap
// ErrInvalidDestination.
func ObjectKey(prefix, destination string) (string, error) {
	prefix = strings.Trim(prefix, "/")
	if err := CheckPrefix(prefix); err != nil {
		return "", err
	}
	if err := CheckDestination(destination); err != nil {
		return "", err
	}
	key := destination
	if prefix != "" {
		key = prefix + "/" + destination
	}
	if len(key) > MaxObjectKeyBytes {
		return "", destinationError(fmt.Sprintf("the object key would be %d bytes, over %d", len(key), MaxObjectKeyBytes))
	}
	return key, nil
}

// CheckPrefix reports whether prefix, with no slash at either end, is a
// usable alias root: empty (the bucket's root), or segments that are not
// empty, "." or "..", with no '\', NUL or other control character and valid
// UTF-8. It is looser than CheckDestination because an operator, not a
// command, writes it. The error wraps ErrInvalidDestination.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !utf8.ValidString(prefix) {
		return destinationError("alias prefix is not valid UTF-8")
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		switch seg {
		case "":
			return destinationError("alias prefix " + quoteBounded(prefix) + " has an empty segment")
		case ".", "..":
			return destinationError("alias prefix " + quoteBounded(prefix) + " has a relative segment")
		}
		if strings.ContainsFunc(seg, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
			return destinationError("alias prefix " + quoteBounded(prefix) + " has a backslash or a control character")
		}
	}
	return nil
}

func destinationError(detail string) error {
	return fmt.Errorf("%w: %s", ErrInvalidDestination, detail)
}

// allowedInSegment is deliberately narrower than any provider: widening it
// later is additive, narrowing it is not.
func allowedInSegment(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._-+=@,()[]~ ", c) >= 0
}

// disallowed returns the distinct bytes of seg outside the allowed set,
// sorted, at most eight; the caller quotes them, so a control character or
// a byte of a non-ASCII character shows as an escape.
func disallowed(seg string) string {
	var bad []byte
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; !allowedInSegment(c) && !slices.Contains(bad, c) {
			bad = append(bad, c)
		}
	}
	slices.Sort(bad)
	if len(bad) > 8 {
		bad = bad[:8]
	}
	return string(bad)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isSpace is Python's str.isspace, which the reference strips with.
func isSpace(r rune) bool { return unicode.IsSpace(r) || (0x1c <= r && r <= 0x1f) }
