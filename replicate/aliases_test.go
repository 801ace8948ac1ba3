package replicate_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
)

const gcsEntry = `{"provider": "gcs", "bucket": "co-artifacts", "prefix": "replications"}`

var gcsBinding = replicate.Binding{Provider: "gcs", Bucket: "co-artifacts", Prefix: "replications"}

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
			path: func(t *testing.T) string { return writeFile(t, `{"good": `+gcsEntry+`, not json`) },
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
			logs: []string{`"level":"INFO","msg":"replicate: alias file loaded","path"`, `"provisioned":[]`},
		},
		{
			name: "bindings of every provider",
			path: func(t *testing.T) string {
				return writeFile(t, `{"zed": `+gcsEntry+`, "flat": {"provider": "gcs", "bucket": "b-1"},
					"slashes": {"provider": "gcs", "bucket": "b.example.com", "prefix": "/a/b/"},
					"drive": {"provider": "gdrive"}, "archive": {"provider": "ia"}}`)
			},
			want: map[string]replicate.Binding{
				"zed":     gcsBinding,
				"flat":    {Provider: "gcs", Bucket: "b-1"},
				"slashes": {Provider: "gcs", Bucket: "b.example.com", Prefix: "a/b"},
				"drive":   {Provider: "gdrive"},
				"archive": {Provider: "ia"},
			},
			logs: []string{`"provisioned":["archive","drive","flat","slashes","zed"]`},
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
		{name: "no provider", alias: "bad", entry: `{"bucket": "b-1"}`, why: "names no provider"},
		{name: "an empty provider", alias: "bad", entry: `{"provider": "", "bucket": "b-1"}`, why: "no provider named"},
		{name: "a provider that is not a string", alias: "bad", entry: `{"provider": 1}`, why: "provider is not a string"},
		{name: "an unknown provider", alias: "bad", entry: `{"provider": "dropbox", "bucket": "b-1"}`, why: `provider \"dropbox\" is not one this host can bind`},
		{name: "gcs without a bucket", alias: "bad", entry: `{"provider": "gcs"}`, why: "names no bucket"},
		{name: "gcs with a null bucket", alias: "bad", entry: `{"provider": "gcs", "bucket": null}`, why: "bucket is not a string"},
		{name: "gcs with an empty bucket", alias: "bad", entry: `{"provider": "gcs", "bucket": ""}`, why: "needs a valid bucket name"},
		{name: "a bucket with a slash", alias: "bad", entry: `{"provider": "gcs", "bucket": "b-1/other"}`, why: "needs a valid bucket name"},
		{name: "a bucket in upper case", alias: "bad", entry: `{"provider": "gcs", "bucket": "Bucket"}`, why: "needs a valid bucket name"},
		{name: "a prefix that is not a string", alias: "bad", entry: `{"provider": "gcs", "bucket": "b-1", "prefix": 7}`, why: "prefix is not a string"},
		{name: "a prefix that climbs", alias: "bad", entry: `{"provider": "gcs", "bucket": "b-1", "prefix": "reps/.."}`, why: "relative segment"},
		{name: "an entry that is not an object", alias: "bad", entry: `"not-a-mapping"`, why: "not a JSON object"},
		{name: "a null entry", alias: "bad", entry: `null`, why: "not a JSON object"},
		{name: "an empty alias name", alias: "", entry: gcsEntry, why: "an alias name is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.LogBuffer
			path := writeFile(t, `{"good": `+gcsEntry+`, "`+tc.alias+`": `+tc.entry+`}`)
			a := replicate.LoadAliases(path, slogJSON(&logs))
			if diff := cmp.Diff(map[string]replicate.Binding{"good": gcsBinding}, bindings(a)); diff != "" {
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
	path := writeFile(t, `{"primary": {"provider": "gcs", "bucket": "co-artifacts", "prefix": "replications",
		"secret": "s3cr3t", "credentials": "/etc/key.json", "private_key": {"k": "-----BEGIN PRIVATE KEY-----"}},
		"drive": {"provider": "gdrive", "folder_id": "f-1", "token": "t0ken"}}`)
	a := replicate.LoadAliases(path, slogJSON(&logs))

	if diff := cmp.Diff(map[string]replicate.Binding{"primary": gcsBinding, "drive": {Provider: "gdrive"}}, bindings(a)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	for _, secret := range []string{"s3cr3t", "/etc/key.json", "PRIVATE KEY", "t0ken", "f-1"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs carry %q:\n%s", secret, logs.String())
		}
	}
	for _, want := range []string{
		`"msg":"replicate: dropped alias fields a binding does not declare","path":` + jsonString(path) + `,"alias":"primary","provider":"gcs","fields":["credentials","private_key","secret"]`,
		`"alias":"drive","provider":"gdrive","fields":["folder_id","token"]`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	// Structurally: the three declared fields are all a Binding has.
	typ := reflect.TypeFor[replicate.Binding]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if diff := cmp.Diff([]string{"Provider", "Bucket", "Prefix"}, fields); diff != "" {
		t.Errorf("Binding fields (-want +got):\n%s", diff)
	}
}

func TestNewAliases(t *testing.T) {
	a, err := replicate.NewAliases(map[string]replicate.Binding{
		"primary": {Provider: "gcs", Bucket: "co-artifacts", Prefix: "/replications/"},
		"drive":   {Provider: "gdrive", Bucket: "ignored"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]replicate.Binding{"primary": gcsBinding, "drive": {Provider: "gdrive"}}, bindings(a)); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	for _, bad := range []map[string]replicate.Binding{
		{"": gcsBinding},
		{"x": {Provider: "gcs"}},
		{"x": {Provider: "s3", Bucket: "b-1"}},
		{"x": {Bucket: "b-1"}},
		{"x": {Provider: "gcs", Bucket: "b-1", Prefix: "a//b"}},
	} {
		if a, err := replicate.NewAliases(bad); err == nil || a != nil || !strings.HasPrefix(err.Error(), "replicate: ") {
			t.Errorf("NewAliases(%v) = %v, %v; want an error", bad, a, err)
		}
	}
	// The set is a snapshot: changing the map afterwards changes nothing.
	m := map[string]replicate.Binding{"primary": gcsBinding}
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
