package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// A caller's own rule, checked before every request: here only one
// origin may be fetched, so its redirect to another is refused before
// anything reaches that one, and the refusal is not retried.
func ExampleFetcher_Get_checkURL() {
	var internalHits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		fmt.Fprint(w, "secret")
	}))
	defer internal.Close()
	public := httptest.NewServer(http.RedirectHandler(internal.URL+"/admin", http.StatusFound))
	defer public.Close()

	f := fetch.New(fetch.Options{
		Guard: guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
	})
	defer f.Close()

	errForeign := errors.New("not our origin")
	allowed, _ := url.Parse(public.URL)
	_, err := f.Get(context.Background(), public.URL+"/feed", fetch.GetOptions{
		CheckURL: func(ctx context.Context, u *url.URL) error {
			if u.Host != allowed.Host {
				return errForeign
			}
			return nil
		},
	})
	fmt.Println("refused:", errors.Is(err, fetch.ErrURLRefused))
	fmt.Println("our error:", errors.Is(err, errForeign))
	fmt.Println("retryable:", fetch.Retryable(err))
	fmt.Println("requests to the other origin:", internalHits.Load())
	// Output:
	// refused: true
	// our error: true
	// retryable: false
	// requests to the other origin: 0
}
