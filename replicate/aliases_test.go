package replicate_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
)

// gcsEntry is the alias file's entry of alias gcs-artifacts, named by the
// rule: gcs-<role> binds co-gcs-<role>.
const gcsEntry = `{"provider": "gcs", "bucket": "co-gcs-artifacts", "prefix": "replications"}`

var gcsBinding = replicate.Binding{Provider: "gcs", Bucket: "co-gcs-artifacts", Prefix: "replications"}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "aliases.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// bindings is what an Aliases provisions, by name.
func bindings(a *replicate.Aliases) map[string]replicate.Binding {
	m := map[string]replicate.Binding{}
	for _, name := range a.Names() {
		m[name], _ = a.Resolve(name)
	}
	return m
}

func TestLoadAliases(t *testing.T) {
	tests := []struct {
		name string
		path func(t *testing.T) string
		want map[string]replicate.Binding
		// logs are substrings the log must hold (level and message).
		logs []string
	}{
		{
			name: "unset provisions nothing",
			path: func(*testing.T) string { return "" },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"INFO","msg":"replicate: no alias file set`},
		},
		{
			name: "a missing file provisions nothing",
			path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent.json") },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"INFO","msg":"replicate: no alias file on this host`},
		},
		{
			name: "an unreadable file provisions nothing",
			path: func(t *testing.T) string { return t.TempDir() }, // a directory: read fails
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"ERROR","msg":"replicate: alias file is unreadable`, "is a directory"},
		},
		{
			name: "a file that is not JSON provisions nothing",
			path: func(t *testing.T) string { return writeFile(t, `{"gcs-artifacts": `+gcsEntry+`, not json`) },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"ERROR","msg":"replicate: alias file is unreadable`, "invalid character"},
		},
		{
			name: "a JSON list provisions nothing",
			path: func(t *testing.T) string { return writeFile(t, `[`+gcsEntry+`]`) },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"ERROR","msg":"replicate: alias file is unreadable`},
		},
		{
			name: "JSON null provisions nothing",
			path: func(t *testing.T) string { return writeFile(t, `null`) },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"ERROR","msg":"replicate: alias file is unreadable`},
		},
		{
			name: "a JSON string provisions nothing",
			path: func(t *testing.T) string { return writeFile(t, `"primary"`) },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"ERROR","msg":"replicate: alias file is unreadable`},
		},
		{
			name: "an empty table",
			path: func(t *testing.T) string { return writeFile(t, `{}`) },
			want: map[string]replicate.Binding{},
			logs: []string{`"level":"INFO","msg":"replicate: alias file loaded","path"`, `"provisioned":[]`, `"credentials_files":{}`},
		},
		{
			name: "bindings of every provider",
			path: func(t *testing.T) string {
				return writeFile(t, `{"gcs-artifacts": `+gcsEntry+`, "gcs-flat": {"provider": "gcs", "bucket": "co-gcs-test-flat"},
					"gcs-slashes": {"provider": "gcs", "bucket": "co-gcs-slashes", "prefix": "/a/b/"},
					"gdrive-drive": {"provider": "gdrive"}, "ia-archive": {"provider": "ia"}}`)
			},
			want: map[string]replicate.Binding{
				"gcs-artifacts": gcsBinding,
				"gcs-flat":      {Provider: "gcs", Bucket: "co-gcs-test-flat"},
				"gcs-slashes":   {Provider: "gcs", Bucket: "co-gcs-slashes", Prefix: "a/b"},
				"gdrive-drive":  {Provider: "gdrive"},
				"ia-archive":    {Provider: "ia"},
			},
			logs: []string{`"provisioned":["gcs-artifacts","gcs-flat","gcs-slashes","gdrive-drive","ia-archive"]`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			a := replicate.LoadAliases(tc.path(t), slogJSON(&logs))
			if diff := cmp.Diff(tc.want, bindings(a)); diff != "" {
				t.Errorf("bindings (-want +got):\n%s", diff)
			}
			for _, want := range tc.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("logs lack %s:\n%s", want, logs.String())
				}
			}
		})
	}
}

// One unusable entry drops itself, and only itself.
func TestLoadAliasesDropsAnUnusableEntry(t *testing.T) {
	tests := []struct {
		name  string
		alias string
		entry string
		why   string
	}{
		{name: "no provider", alias: "gcs-bad", entry: `{"bucket": "b-1"}`, why: "names no provider"},
		{name: "an empty provider", alias: "gcs-bad", entry: `{"provider": "", "bucket": "b-1"}`, why: "no provider named"},
		{name: "a provider that is not a string", alias: "gcs-bad", entry: `{"provider": 1}`, why: "provider is not a string"},
		{name: "an unknown provider", alias: "gcs-bad", entry: `{"provider": "dropbox", "bucket": "b-1"}`, why: `provider \"dropbox\" is not one this host can bind`},
		{name: "gcs without a bucket", alias: "gcs-bad", entry: `{"provider": "gcs"}`, why: "names no bucket"},
		{name: "gcs with a null bucket", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": null}`, why: "bucket is not a string"},
		{name: "gcs with an empty bucket", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": ""}`, why: "needs a valid bucket name"},
		{name: "a bucket with a slash", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "b-1/other"}`, why: "needs a valid bucket name"},
		{name: "a bucket in upper case", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "Bucket"}`, why: "needs a valid bucket name"},
		{name: "a prefix that is not a string", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "b-1", "prefix": 7}`, why: "prefix is not a string"},
		{name: "a prefix that climbs", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "b-1", "prefix": "reps/.."}`, why: "relative segment"},
		{name: "an entry that is not an object", alias: "gcs-bad", entry: `"not-a-mapping"`, why: "not a JSON object"},
		{name: "a null entry", alias: "gcs-bad", entry: `null`, why: "not a JSON object"},
		{name: "an empty alias name", alias: "", entry: gcsEntry, why: "an alias name is empty"},
		// The naming rule, with the reference's examples.
		{name: "no provider prefix", alias: "public", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: "is not <provider>-<role>"},
		{name: "upper case", alias: "GCS-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: "is not <provider>-<role>"},
		{name: "an underscore", alias: "gcs_publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: "is not <provider>-<role>"},
		{name: "no role", alias: "gcs-", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: "is not <provider>-<role>"},
		{name: "a role starting with a digit", alias: "gcs-9lives", entry: `{"provider": "gcs", "bucket": "co-gcs-9lives"}`, why: "is not <provider>-<role>"},
		{name: "an unknown provider prefix", alias: "s3-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: "is not <provider>-<role>"},
		{name: "another provider's prefix", alias: "ia-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publication"}`, why: `the name says \"ia\" but the binding is \"gcs\"`},
		{name: "a gdrive name on an ia binding", alias: "gdrive-docs", entry: `{"provider": "ia"}`, why: `the name says \"gdrive\" but the binding is \"ia\"`},
		{name: "another role's bucket", alias: "gcs-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-blobs"}`, why: "binds co-gcs-publication or co-gcs-test-publication"},
		{name: "a superstring of the bucket", alias: "gcs-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publication-archive"}`, why: "binds co-gcs-publication"},
		{name: "a typo in the bucket", alias: "gcs-publication", entry: `{"provider": "gcs", "bucket": "co-gcs-publicatio"}`, why: "binds co-gcs-publication"},
		{name: "a bucket outside the scheme", alias: "gcs-publication", entry: `{"provider": "gcs", "bucket": "example-bucket"}`, why: "binds co-gcs-publication"},
		// credentials_file: a host path, absolute, to a file that opens.
		{name: "a relative credentials file", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "co-gcs-bad", "credentials_file": "keys/publication.json"}`, why: "credentials_file must be an absolute host path"},
		{name: "an empty credentials file", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "co-gcs-bad", "credentials_file": ""}`, why: "credentials_file must be an absolute host path"},
		{name: "a credentials file that is not a string", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "co-gcs-bad", "credentials_file": 42}`, why: "credentials_file must be an absolute host path"},
		{name: "a missing credentials file", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "co-gcs-bad", "credentials_file": "/nonexistent/key.json"}`, why: `credentials_file \"/nonexistent/key.json\" cannot be opened: no such file or directory`},
		{name: "a directory as credentials file", alias: "gcs-bad", entry: `{"provider": "gcs", "bucket": "co-gcs-bad", "credentials_file": "/"}`, why: `credentials_file \"/\" is not a regular file`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			path := writeFile(t, `{"gcs-artifacts": `+gcsEntry+`, "`+tc.alias+`": `+tc.entry+`}`)
			a := replicate.LoadAliases(path, slogJSON(&logs))
			if diff := cmp.Diff(map[string]replicate.Binding{"gcs-artifacts": gcsBinding}, bindings(a)); diff != "" {
				t.Errorf("bindings (-want +got):\n%s", diff)
			}
			if _, ok := a.Resolve(tc.alias); ok {
				t.Errorf("the unusable alias %q resolves", tc.alias)
			}
			for _, want := range []string{`"level":"WARN","msg":"replicate: ignoring an unusable alias binding"`, tc.why} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("logs lack %s:\n%s", want, logs.String())
				}
			}
		})
	}
}

// A binding has nowhere to hold a credential, and a field it does not
// declare is neither kept nor logged with its value.
func TestUndeclaredFieldsAreDropped(t *testing.T) {
	var logs testenv.LogBuffer
	path := writeFile(t, `{"gcs-artifacts": {"provider": "gcs", "bucket": "co-gcs-artifacts", "prefix": "replications",
		"secret": "s3cr3t", "credentials": "/etc/key.json", "private_key": {"k": "-----BEGIN PRIVATE KEY-----"}},
		"gdrive-drive": {"provider": "gdrive", "folder_id": "f-1", "token": "t0ken", "credentials_file": "/etc/drive.json"}}`)
	a := replicate.LoadAliases(path, slogJSON(&logs))

	if diff := cmp.Diff(map[string]replicate.Binding{"gcs-artifacts": gcsBinding, "gdrive-drive": {Provider: "gdrive"}}, bindings(a)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	for _, secret := range []string{"s3cr3t", "/etc/key.json", "PRIVATE KEY", "t0ken", "f-1", "/etc/drive.json"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs carry %q:\n%s", secret, logs.String())
		}
	}
	for _, want := range []string{
		`"msg":"replicate: dropped alias fields a binding does not declare","path":` + jsonString(path) + `,"alias":"gcs-artifacts","provider":"gcs","fields":["credentials","private_key","secret"]`,
		`"alias":"gdrive-drive","provider":"gdrive","fields":["credentials_file","folder_id","token"]`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	// Structurally: the four declared fields are all a Binding has.
	typ := reflect.TypeFor[replicate.Binding]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if diff := cmp.Diff([]string{"Provider", "Bucket", "Prefix", "CredentialsFile"}, fields); diff != "" {
		t.Errorf("Binding fields (-want +got):\n%s", diff)
	}
}

func TestNewAliases(t *testing.T) {
	a, err := replicate.NewAliases(map[string]replicate.Binding{
		"primary": {Provider: "gcs", Bucket: "co-artifacts", Prefix: "/replications/"},
		"drive":   {Provider: "gdrive", Bucket: "ignored", CredentialsFile: "/ignored"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]replicate.Binding{"primary": {Provider: "gcs", Bucket: "co-artifacts", Prefix: "replications"}, "drive": {Provider: "gdrive"}}, bindings(a)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	for _, bad := range []map[string]replicate.Binding{
		{"": gcsBinding},
		{"x": {Provider: "gcs"}},
		{"x": {Provider: "s3", Bucket: "b-1"}},
		{"x": {Bucket: "b-1"}},
		{"x": {Provider: "gcs", Bucket: "b-1", Prefix: "a//b"}},
		{"x": {Provider: "gcs", Bucket: "b-1", CredentialsFile: "key.json"}},
		{"x": {Provider: "gcs", Bucket: "b-1", CredentialsFile: "/nonexistent/key.json"}},
	} {
		if a, err := replicate.NewAliases(bad); err == nil || a != nil || !strings.HasPrefix(err.Error(), "replicate: ") {
			t.Errorf("NewAliases(%v) = %v, %v; want an error", bad, a, err)
		}
	}
	// The set is a snapshot: changing the map afterwards changes nothing.
	m := map[string]replicate.Binding{"gcs-artifacts": gcsBinding}
	a, _ = replicate.NewAliases(m)
	m["smuggled"] = gcsBinding
	if _, ok := a.Resolve("smuggled"); ok {
		t.Error("an alias added to the map afterwards resolves")
	}
	var none *replicate.Aliases
	if _, ok := none.Resolve("primary"); ok || len(none.Names()) != 0 {
		t.Error("a nil Aliases provisions something")
	}
}

func jsonString(s string) string { return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"` }

// A binding may name the key file its writer authenticates with: a path,
// loaded and logged as a path, never read here.
func TestACredentialsFile(t *testing.T) {
	key := filepath.Join(t.TempDir(), "publication-writer.json")
	if err := os.WriteFile(key, []byte(`{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	path := writeFile(t, `{"gcs-artifacts": `+gcsEntry+`,
		"gcs-publication": {"provider": "gcs", "bucket": "co-gcs-publication", "credentials_file": `+jsonString(key)+`}}`)
	a := replicate.LoadAliases(path, slogJSON(&logs))
	want := map[string]replicate.Binding{
		"gcs-artifacts":   gcsBinding,
		"gcs-publication": {Provider: "gcs", Bucket: "co-gcs-publication", CredentialsFile: key},
	}
	if diff := cmp.Diff(want, bindings(a)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if want := `"credentials_files":{"gcs-publication":` + jsonString(key) + `}`; !strings.Contains(logs.String(), want) {
		t.Errorf("logs lack %s:\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("logs carry the key:\n%s", logs.String())
	}
}

// A value that is not a path may be a pasted key: refused without quoting it.
func TestAPastedKeyIsNeverLogged(t *testing.T) {
	var logs testenv.LogBuffer
	path := writeFile(t, `{"gcs-other": {"provider": "gcs", "bucket": "co-gcs-other",
		"credentials_file": "{\"type\": \"service_account\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\"}"}}`)
	a := replicate.LoadAliases(path, slogJSON(&logs))
	if len(a.Names()) != 0 {
		t.Errorf("provisioned %v", a.Names())
	}
	if !strings.Contains(logs.String(), "credentials_file must be an absolute host path") || strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// primary predates the naming rule: it loads with any bucket until its
// date, and past it still loads, with an ERROR at every start.
func TestALegacyAliasName(t *testing.T) {
	path := writeFile(t, `{"primary": {"provider": "gcs", "bucket": "co-artifacts"}}`)
	for _, tc := range []struct {
		now     time.Time
		overdue bool
	}{
		{now: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)},
		{now: time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)},
		{now: time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC), overdue: true},
	} {
		var logs testenv.LogBuffer
		a := replicate.LoadAliasesAt(path, slogJSON(&logs), tc.now)
		if diff := cmp.Diff(map[string]replicate.Binding{"primary": {Provider: "gcs", Bucket: "co-artifacts"}}, bindings(a)); diff != "" {
			t.Errorf("%v: bindings (-want +got):\n%s", tc.now, diff)
		}
		reported := strings.Contains(logs.String(), `"level":"ERROR","msg":"replicate: a legacy alias name is past its date`) &&
			strings.Contains(logs.String(), `"alias":"primary","until":"2026-12-31"`)
		if reported != tc.overdue {
			t.Errorf("%v: reported %v, want %v:\n%s", tc.now, reported, tc.overdue, logs.String())
		}
	}
}

func TestCheckAliasName(t *testing.T) {
	gcsTo := func(bucket string) replicate.Binding { return replicate.Binding{Provider: "gcs", Bucket: bucket} }
	for _, tc := range []struct {
		name string
		b    replicate.Binding
		ok   bool
	}{
		{"gcs-publication", gcsTo("co-gcs-publication"), true},
		{"gcs-publication", gcsTo("co-gcs-test-publication"), true},
		{"gcs-test-publication", gcsTo("co-gcs-test-publication"), true}, // the role may itself begin with test-
		{"gcs-a1-b", gcsTo("co-gcs-a1-b"), true},
		{"gdrive-docs", replicate.Binding{Provider: "gdrive"}, true},
		{"ia-items", replicate.Binding{Provider: "ia"}, true},
		{"primary", gcsTo("anything-at-all"), true},
		{"public", gcsTo("co-gcs-publication"), false},
		{"GCS-publication", gcsTo("co-gcs-publication"), false},
		{"gcs_publication", gcsTo("co-gcs-publication"), false},
		{"gcs-", gcsTo("co-gcs-"), false},
		{"gcs-9lives", gcsTo("co-gcs-9lives"), false},
		{"gcs-Pub", gcsTo("co-gcs-Pub"), false},
		{"gcs-pub\n", gcsTo("co-gcs-pub"), false},
		{"s3-publication", gcsTo("co-gcs-publication"), false},
		{"ia-publication", gcsTo("co-gcs-publication"), false},
		{"gcs-publication", gcsTo("co-gcs-blobs"), false},
		{"gcs-publication", gcsTo("co-gcs-publication-archive"), false},
		{"gcs-publication", gcsTo("example-bucket"), false},
		{"gcs-docs", replicate.Binding{Provider: "gdrive"}, false},
	} {
		err := replicate.CheckAliasName(tc.name, tc.b)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAliasName(%q, %+v) = %v, want ok %v", tc.name, tc.b, err, tc.ok)
		}
	}
	if replicate.AliasNamePattern != `^(gcs|gdrive|ia)-[a-z][a-z0-9-]*$` {
		t.Errorf("the pattern is %s, not the reference's", replicate.AliasNamePattern)
	}
}
