package fetch

import (
	"runtime/debug"
	"testing"

	"golang.org/x/net/http/httpguts"
)

func TestModuleVersion(t *testing.T) {
	other := debug.Module{Path: "example.com/service", Version: "v3.0.0"}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{name: "the main module, released", bi: debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.0"}}, want: "v1.2.0"},
		{name: "the main module, from a checkout",
			bi:   debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20260101120000-0123456789ab+dirty"}},
			want: "v0.0.0-20260101120000-0123456789ab+dirty"},
		{name: "the main module, unstamped", bi: debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, want: "devel"},
		{name: "the main module, empty", bi: debug.BuildInfo{Main: debug.Module{Path: modulePath}}, want: "devel"},
		{name: "a dependency of a service",
			bi:   debug.BuildInfo{Main: other, Deps: []*debug.Module{{Path: "golang.org/x/net", Version: "v0.62.0"}, {Path: modulePath, Version: "v0.4.1"}}},
			want: "v0.4.1"},
		{name: "a dependency replaced by a fork",
			bi:   debug.BuildInfo{Main: other, Deps: []*debug.Module{{Path: modulePath, Version: "v0.4.1", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.4.2-fix"}}}},
			want: "v0.4.2-fix"},
		{name: "a dependency replaced by a directory",
			bi:   debug.BuildInfo{Main: other, Deps: []*debug.Module{{Path: modulePath, Version: "v0.4.1", Replace: &debug.Module{Path: "../replicator"}}}},
			want: "devel"},
		{name: "not in the build", bi: debug.BuildInfo{Main: other}, want: "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := moduleVersion(&tt.bi); got != tt.want {
				t.Errorf("moduleVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

// Whatever the build recorded, the version is one token, so the default
// User-Agent stays a valid product/version.
func TestVersionIsAToken(t *testing.T) {
	v := Version()
	if v == "" {
		t.Fatal("Version() is empty")
	}
	for i := range len(v) {
		if !httpguts.IsTokenRune(rune(v[i])) {
			t.Fatalf("Version() = %q: byte %q is not a token character", v, v[i])
		}
	}
	t.Logf("Version() = %q", v)
}
