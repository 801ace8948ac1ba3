package replicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Providers a binding may name. Only gcs has a writer; a gdrive or ia
// binding loads, so its commands are refused provider_disabled (an act on
// the host) rather than alias_unknown (a fix to the spec).
const (
	ProviderGCS    = "gcs"
	ProviderGDrive = "gdrive"
	ProviderIA     = "ia"
)

// AliasNamePattern is the shape of an alias name in the alias file:
// <provider>-<role>, the reference's rule, so a name says which provider it
// binds and, for gcs, which bucket (see CheckAliasName).
const AliasNamePattern = `^(gcs|gdrive|ia)-[a-z][a-z0-9-]*$`

var aliasName = regexp.MustCompile(AliasNamePattern)

// legacyAliases are names the alias file accepts outside the naming rule,
// each until a date (the end of that day, UTC). Past it the binding still
// loads and an ERROR says so at every start: refusing it would close its
// issuer's commands alias_unknown over a date nobody acted on.
var legacyAliases = map[string]time.Time{
	"primary": time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC),
}

// Binding is where one alias may write: a provider and, for gcs, the bucket
// and the prefix inside it that are the alias's root, and the identity it
// writes as. It holds no credential: CredentialsFile is a host path to one,
// read when the Handler builds the alias's client.
type Binding struct {
	// Provider is ProviderGCS, ProviderGDrive or ProviderIA.
	Provider string
	// Bucket is the gcs bucket; empty for the other providers.
	Bucket string
	// Prefix is the root inside the bucket, without a slash at either end;
	// empty roots the alias at the bucket.
	Prefix string
	// CredentialsFile is, for gcs, the absolute path of a service-account
	// key file the alias's own storage client authenticates with; empty
	// means the host's client (Application Default Credentials).
	CredentialsFile string
}

// Aliases is the provisioned set: which alias names resolve on this host,
// and to what. It is read once and never changes; a nil *Aliases provisions
// nothing. It is safe for concurrent use.
type Aliases struct {
	bindings map[string]Binding
}

// NewAliases returns the set holding bindings, checked as the alias file's
// entries are (see LoadAliases) but strictly: the first unusable binding is
// an error naming its alias, and nothing is returned. The naming rule
// (CheckAliasName) is the alias file's and is not applied here. The map is
// copied.
func NewAliases(bindings map[string]Binding) (*Aliases, error) {
	a := &Aliases{bindings: make(map[string]Binding, len(bindings))}
	for _, name := range slices.Sorted(maps.Keys(bindings)) {
		b, err := checkBinding(name, bindings[name])
		if err != nil {
			return nil, err
		}
		a.bindings[name] = b
	}
	return a, nil
}

// Resolve returns the binding of alias, and false when no binding of that
// name is provisioned here.
func (a *Aliases) Resolve(alias string) (Binding, bool) {
	if a == nil {
		return Binding{}, false
	}
	b, ok := a.bindings[alias]
	return b, ok
}

// Names returns every provisioned alias, sorted.
func (a *Aliases) Names() []string {
	names := []string{}
	if a != nil {
		names = append(names, slices.Sorted(maps.Keys(a.bindings))...)
	}
	return names
}

// LoadAliases reads the alias file (REPLICATOR_REPLICATION_ALIASES_FILE): a
// JSON object of alias name to binding,
//
//	{"gcs-publication": {"provider": "gcs", "bucket": "co-gcs-publication", "prefix": "reps",
//	                     "credentials_file": "/etc/replicator/publication-writer.json"}}
//
// It never fails, because a replicate misconfiguration must not stop a
// worker whose other job is content.fetch; every problem is logged and
// provisions less:
//
//   - path "" (unset) or a file that does not exist provisions nothing
//     (INFO);
//   - a file that cannot be read, is not JSON, or is not a JSON object
//     provisions nothing (ERROR): which aliases exist must not depend on
//     where a file broke;
//   - an unusable entry drops only itself (WARN): an empty alias name, an
//     entry that is not an object, a provider that is missing, not a
//     string, or not gcs, gdrive or ia; for gcs a bucket that is missing or
//     not a valid bucket name, a prefix that is not a string or fails
//     CheckPrefix (slashes at its ends are dropped first), or a
//     credentials_file that is not an absolute path to a readable regular
//     file; a name that breaks the naming rule (CheckAliasName);
//   - a legacy name past its date loads, with an ERROR.
//
// Only the fields a binding declares (provider; for gcs, bucket, prefix and
// credentials_file) are read. Any other member is dropped unread and never
// kept, and the log names it without its value, so a key pasted into the
// file is neither loaded nor logged. A credentials_file is a path: the log
// names it, never what the file holds, and a value that is not a path is
// refused without being quoted.
func LoadAliases(path string, log *slog.Logger) *Aliases {
	return loadAliases(path, log, time.Now())
}

// loadAliases is LoadAliases on the clock now, which decides only whether a
// legacy name is past its date.
func loadAliases(path string, log *slog.Logger, now time.Time) *Aliases {
	if log == nil {
		log = slog.Default()
	}
	empty := &Aliases{bindings: map[string]Binding{}}
	if path == "" {
		log.Info("replicate: no alias file set; nothing is provisioned, every replicate command is refused alias_unknown")
		return empty
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Info("replicate: no alias file on this host; nothing is provisioned", "path", path)
		return empty
	}
	if err != nil {
		log.Error("replicate: alias file is unreadable; nothing is provisioned, every replicate command is refused",
			"path", path, "error", err.Error())
		return empty
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		detail := "not a JSON object of alias to binding"
		if err != nil {
			detail += ": " + err.Error()
		}
		log.Error("replicate: alias file is unreadable; nothing is provisioned, every replicate command is refused",
			"path", path, "error", detail)
		return empty
	}
	a := &Aliases{bindings: make(map[string]Binding, len(raw))}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		b, ignored, err := parseBinding(name, raw[name])
		if err == nil {
			err = CheckAliasName(name, b)
		}
		if err != nil {
			log.Warn("replicate: ignoring an unusable alias binding", "path", path, "alias", name, "error", err.Error())
			continue
		}
		if len(ignored) > 0 {
			log.Warn("replicate: dropped alias fields a binding does not declare", "path", path, "alias", name,
				"provider", b.Provider, "fields", ignored)
		}
		a.bindings[name] = b
	}
	for _, name := range a.Names() {
		if until, ok := legacyAliases[name]; ok && now.After(until.AddDate(0, 0, 1)) {
			log.Error("replicate: a legacy alias name is past its date; it still loads: move its issuers to a <provider>-<role> alias, then remove it",
				"path", path, "alias", name, "until", until.Format(time.DateOnly))
		}
	}
	files := map[string]string{}
	for name, b := range a.bindings {
		if b.CredentialsFile != "" {
			files[name] = b.CredentialsFile
		}
	}
	log.Info("replicate: alias file loaded", "path", path, "provisioned", a.Names(), "credentials_files", files)
	return a
}

// CheckAliasName applies the alias file's naming rule to a binding: the
// name matches AliasNamePattern, its provider prefix is the binding's
// provider, and a gcs-<role> alias binds the bucket co-gcs-<role> or its
// test twin co-gcs-test-<role>, so the name decides the bucket and a typo
// cannot bind one bucket under another's name. A legacy name (primary,
// until the end of 2026) is exempt, its bucket unchecked.
func CheckAliasName(name string, b Binding) error {
	if _, ok := legacyAliases[name]; ok {
		return nil
	}
	if !aliasName.MatchString(name) {
		return fmt.Errorf("replicate: alias %q: the name is not <provider>-<role> (%s)", bounded(name), AliasNamePattern)
	}
	named, role, _ := strings.Cut(name, "-")
	if named != b.Provider {
		return fmt.Errorf("replicate: alias %q: the name says %q but the binding is %q", name, named, bounded(b.Provider))
	}
	if b.Provider == ProviderGCS && b.Bucket != "co-gcs-"+role && b.Bucket != "co-gcs-test-"+role {
		return fmt.Errorf("replicate: alias %q binds co-gcs-%s or co-gcs-test-%s, not %q", name, role, role, bounded(b.Bucket))
	}
	return nil
}

// parseBinding reads one entry, returning the names of the members it did
// not read.
func parseBinding(name string, raw json.RawMessage) (Binding, []string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return Binding{}, nil, errors.New("replicate: the binding is not a JSON object")
	}
	provider, err := stringMember(members, "provider")
	if err != nil {
		return Binding{}, nil, err
	}
	b := Binding{Provider: provider}
	read := []string{"provider"}
	if provider == ProviderGCS {
		if b.Bucket, err = stringMember(members, "bucket"); err != nil {
			return Binding{}, nil, err
		}
		if _, ok := members["prefix"]; ok {
			if b.Prefix, err = stringMember(members, "prefix"); err != nil {
				return Binding{}, nil, err
			}
		}
		if raw, ok := members["credentials_file"]; ok {
			// The rule, never the value: the likeliest wrong value is a
			// pasted key.
			if json.Unmarshal(raw, &b.CredentialsFile) != nil || b.CredentialsFile == "" {
				return Binding{}, nil, errors.New("replicate: the binding's credentials_file must be an absolute host path to a key file")
			}
		}
		read = append(read, "bucket", "prefix", "credentials_file")
	}
	var ignored []string
	for _, m := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains(read, m) {
			ignored = append(ignored, m)
		}
	}
	b, err = checkBinding(name, b)
	return b, ignored, err
}

func stringMember(members map[string]json.RawMessage, name string) (string, error) {
	raw, ok := members[name]
	if !ok {
		return "", fmt.Errorf("replicate: the binding names no %s", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || string(raw) == "null" {
		return "", fmt.Errorf("replicate: the binding's %s is not a string", name)
	}
	return s, nil
}

// checkBinding applies the rules every binding obeys, whichever way it
// arrived, and normalizes the prefix.
func checkBinding(name string, b Binding) (Binding, error) {
	if name == "" {
		return Binding{}, errors.New("replicate: an alias name is empty")
	}
	switch b.Provider {
	case ProviderGCS:
		if !validBucket(b.Bucket) {
			return Binding{}, fmt.Errorf("replicate: alias %q: a gcs binding needs a valid bucket name, not %q", name, bounded(b.Bucket))
		}
		b.Prefix = strings.Trim(b.Prefix, "/")
		if err := CheckPrefix(b.Prefix); err != nil {
			return Binding{}, fmt.Errorf("replicate: alias %q: %w", name, err)
		}
		if err := checkCredentialsFile(b.CredentialsFile); err != nil {
			return Binding{}, fmt.Errorf("replicate: alias %q: %w", name, err)
		}
	case ProviderGDrive, ProviderIA:
		// No writer yet, and so nothing a root could bound, nor an
		// identity to write as.
		b.Bucket, b.Prefix, b.CredentialsFile = "", "", ""
	case "":
		return Binding{}, fmt.Errorf("replicate: alias %q: no provider named", name)
	default:
		return Binding{}, fmt.Errorf("replicate: alias %q: provider %q is not one this host can bind (gcs, gdrive, ia)", name, bounded(b.Provider))
	}
	return b, nil
}

// checkCredentialsFile refuses a credentials file that is not an absolute
// path to a regular file this process can open: resolved against the
// working directory, a relative path would load whatever key sits there. ""
// (the host's identity) passes. The file is opened and closed, not read;
// the error names the path and never what the file holds.
func checkCredentialsFile(path string) error {
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		// Not quoted: a value that is not a path may be a pasted key.
		return errors.New("credentials_file must be an absolute host path to a key file")
	}
	// Stat first, so a FIFO or a device is refused without being opened.
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("credentials_file %q is not a regular file", bounded(path))
	}
	if err == nil {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			return f.Close()
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named once, below
	}
	return fmt.Errorf("credentials_file %q cannot be opened: %w", bounded(path), err)
}

// validBucket is GCS's bucket naming rule, loosely: 3 to 222 characters of
// a-z 0-9 - _ and '.', starting and ending with a letter or digit. It keeps
// a bucket that could not exist, or would change the meaning of a gs:// or
// https:// URL built from it, out of the table.
func validBucket(s string) bool {
	if len(s) < 3 || len(s) > 222 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// bounded cuts an operator- or issuer-supplied value for an error message.
func bounded(s string) string {
	const limit = 120
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
