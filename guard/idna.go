package guard

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrInvalidHost is wrapped when a host name has no ASCII form: IDNA
// (UTS #46, the Lookup profile net/http uses) refuses it, or it maps to
// nothing. No request can name such a host, now or later, so callers treat
// it as permanent (the fetcher's not_fetchable). It is neither ErrRefused
// nor ErrResolve.
var ErrInvalidHost = errors.New("guard: host name does not convert to ASCII")

// ASCIIHost returns the name net/http dials for host: host itself when it
// is all ASCII (net/http leaves such names alone, case included), else
// idna.Lookup.ToASCII of it, so "bücher.test" becomes "xn--bcher-kva.test"
// and "①②⑦.0.0.1" becomes "127.0.0.1". Checking this name rather than the
// one written is what makes the guard judge the destination that is really
// dialed.
//
// A non-ASCII host that does not convert, or converts to "", returns an
// error wrapping ErrInvalidHost and the IDNA error. (net/http would then
// dial the raw name, which no resolver answers; refusing says so at once
// instead of as a lookup failure retried forever.)
func ASCIIHost(host string) (string, error) {
	if isASCII(host) {
		return host, nil
	}
	name, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrInvalidHost, host, err)
	}
	if name == "" {
		return "", fmt.Errorf("%w: %q maps to an empty name", ErrInvalidHost, host)
	}
	return name, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
