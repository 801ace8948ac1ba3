package fetch

import (
	"runtime/debug"
	"sync"
)

// modulePath is the module whose version the User-Agent names.
const modulePath = "github.com/replicator-go/replicator"

// Version returns the version of this module in the running program, as the
// Go toolchain recorded it in the build information: "v1.2.0" for a program
// that requires that release, a pseudo-version such as
// "v0.0.0-20260101120000-0123456789ab" for a build from a checkout, and
// "devel" when the toolchain recorded none ("(devel)", or a program built
// without module information). It is read once.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return moduleVersion(bi)
})

// moduleVersion finds this module in bi, as the main module or as a
// dependency (a replacement's version wins), and returns its version or
// "devel".
func moduleVersion(bi *debug.BuildInfo) string {
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path != modulePath {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version == "" || m.Version == "(devel)" {
			return "devel"
		}
		return m.Version
	}
	return "devel"
}

// DefaultUserAgent returns the User-Agent sent unless the request sets its
// own: "replicator-go/" + Version() + " (+https://github.com/replicator-go/replicator)".
func DefaultUserAgent() string {
	return "replicator-go/" + Version() + " (+https://github.com/replicator-go/replicator)"
}
