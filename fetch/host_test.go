package fetch_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// TestHostsAreJudgedAsDialed: a host is judged and paced as the ASCII name
// net/http dials (docs/security.md, Literal spellings and host names: any spelling is judged by the address it means).
// An internationalised name is fetched; an address spelled in other digits
// is refused as the address it is; a name with no ASCII form can never be
// fetched, which is permanent, not a lookup failure retried forever.
func TestHostsAreJudgedAsDialed(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{})
	port := h.Origin.Port()
	tests := []struct {
		name, url  string
		wantKind   string
		wantReason envelope.Reason
		wantSent   int
	}{
		{name: "internationalised name", url: "http://bücher.test:" + port + "/", wantKind: contentfetch.Stored, wantSent: 1},
		{name: "metadata address in circled digits", url: "http://①⑥⑨.②⑤④.①⑥⑨.②⑤④/", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonDestinationRefused},
		{name: "name with no ASCII form", url: "http://bücher-.test:" + port + "/", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonNotFetchable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.Origin.Requests())
			out := h.Handle(t, fetchenv.Command(tt.url))
			if out.Name() != tt.wantKind || out.Reason != string(tt.wantReason) {
				t.Fatalf("outcome = %v/%q (%v), want %v/%q", out.Name(), out.Reason, out.Err, tt.wantKind, tt.wantReason)
			}
			if sent := len(h.Origin.Requests()) - before; sent != tt.wantSent {
				t.Errorf("the origin saw %d requests, want %d", sent, tt.wantSent)
			}
		})
	}
}

// TestSpellingsOfOneHostShareItsPace: a trailing dot, upper case or an
// internationalised name in another form is the same host to the pacer
// (docs/politeness.md, Spacing: per host), so it cannot buy a second budget.
func TestSpellingsOfOneHostShareItsPace(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Interval: time.Hour, MaxWait: 10 * time.Millisecond})
	port := h.Origin.Port()
	for i, url := range []string{
		"http://bücher.test:" + port + "/1",
		"http://XN--BCHER-KVA.test.:" + port + "/2",
		"http://Bücher.TEST.:" + port + "/3",
	} {
		out := h.Handle(t, fetchenv.Command(url))
		want := fetchenv.Parked
		if i == 0 {
			want = contentfetch.Stored
		}
		if out.Name() != want {
			t.Fatalf("%s: outcome = %v (%v), want %v", url, out.Name(), out.Err, want)
		}
		if i > 0 {
			var parked *contentfetch.ParkedError
			if !errors.As(out.Err, &parked) || !strings.EqualFold(parked.Host, "xn--bcher-kva.test") {
				t.Errorf("%s: error = %v, want parked on xn--bcher-kva.test", url, out.Err)
			}
			if out.Key != "xn--bcher-kva.test" {
				t.Errorf("%s: parked on key %q, want xn--bcher-kva.test", url, out.Key)
			}
		}
	}
	if n := len(h.Origin.Requests()); n != 1 {
		t.Errorf("the origin saw %d requests within the hour, want 1", n)
	}
}
