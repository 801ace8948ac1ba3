package guard_test

import (
	"net/netip"
	"testing"

	"github.com/replicator-go/replicator/guard"
)

// A typical issuer's header set: content negotiation, a pinned user agent
// and replayed validators.
var typicalHeaders = map[string]string{
	"User-Agent":        "watcher/2.3.1 (+https://example.org/bot)",
	"Accept":            "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
	"Accept-Language":   "en-US,en;q=0.5",
	"If-None-Match":     `W/"5e15153d-120f"`,
	"If-Modified-Since": "Wed, 21 Oct 2015 07:28:00 GMT",
	"Authorization":     "Bearer abcdefghijklmnopqrstuvwxyz0123456789",
}

func BenchmarkSanitizeHeaders(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := guard.SanitizeHeaders(typicalHeaders); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckAddr(b *testing.B) {
	g := guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	// A public literal walks the whole table, the slowest passing decision.
	a, ok := guard.ParseIPLiteral("93.184.215.14")
	if !ok {
		b.Fatal("not a literal")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := g.CheckAddr(a); err != nil {
			b.Fatal(err)
		}
	}
}
