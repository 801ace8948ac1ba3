package fetch_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// TestUserinfoIsNeverShown fetches URLs whose userinfo is a bare token or a
// name and password, through a 404, a redirect loop and a refused
// connection: no error, fact detail or debug log line shows either.
func TestUserinfoIsNeverShown(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/missing", testenv.Status(http.StatusNotFound, nil, "no"))
	mux.Handle("/loop", testenv.Redirect(http.StatusFound, "/loop"))
	logs := &testenv.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Logger: logger}})
	port, err := testenv.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://origin.test:" + strconv.Itoa(port) + "/x"

	for _, userinfo := range []string{"tok3n-value", "reader:pa55-value"} {
		for _, target := range []string{h.URL("origin.test", "/missing"), h.URL("origin.test", "/loop"), refused} {
			raw := strings.Replace(target, "http://", "http://"+userinfo+"@", 1)
			out := h.Handle(t, fetchenv.Command(raw))
			shown := []string{}
			if out.Err != nil {
				shown = append(shown, out.Err.Error())
			}
			if f, ok := out.Fact.(*envelope.FetchFailed); ok && f.Detail != nil {
				shown = append(shown, *f.Detail)
			}
			if len(shown) == 0 {
				t.Fatalf("%s: kind %v with neither an error nor a detail", target, out.Name())
			}
			for _, s := range shown {
				if strings.Contains(s, "-value") {
					t.Errorf("%s: %q shows the userinfo", target, s)
				}
			}
		}
	}
	if !strings.Contains(logs.String(), "following redirect") {
		t.Fatal("no redirect was logged; the log check below would prove nothing")
	}
	if strings.Contains(logs.String(), "-value") {
		t.Errorf("the log shows a userinfo:\n%s", logs.String())
	}
}
