package fetch

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

func TestBackoffJitterBounds(t *testing.T) {
	const base = 500 * time.Millisecond
	tests := []struct {
		name string
		n    int
		base time.Duration
		u    float64
		want time.Duration
	}{
		{name: "first retry, lowest draw", n: 0, base: base, u: 0, want: 250 * time.Millisecond},
		{name: "first retry, middle draw", n: 0, base: base, u: 0.5, want: 375 * time.Millisecond},
		{name: "second retry, lowest draw", n: 1, base: base, u: 0, want: 500 * time.Millisecond},
		{name: "third retry, lowest draw", n: 2, base: base, u: 0, want: time.Second},
		{name: "sixth retry reaches the cap", n: 6, base: base, u: 0.99, want: MaxGetWait},
		{name: "huge retry number stays capped", n: 5000, base: base, u: 0, want: MaxGetWait},
		{name: "no base, no wait", n: 3, base: 0, u: 0.7, want: 0},
		{name: "large base capped", n: 0, base: time.Hour, u: 0, want: MaxGetWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.n, tt.base, tt.u); got != tt.want {
				t.Errorf("backoff(%d, %s, %v) = %s, want %s", tt.n, tt.base, tt.u, got, tt.want)
			}
		})
	}

	// Across many seeded draws every wait lies in base·2ⁿ·[0.5, 1).
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 5 {
		lo, hi := base<<n/2, base<<n
		for range 1000 {
			u := rng.Float64()
			if got := backoff(n, base, u); got < lo || got >= hi {
				t.Fatalf("backoff(%d, %s, %v) = %s, want within [%s, %s)", n, base, u, got, lo, hi)
			}
		}
	}
	// The top of the range is approached but never reached.
	if got := backoff(0, base, 0.999999999); got >= base {
		t.Errorf("backoff with u just under 1 = %s, want under %s", got, base)
	}
}

func TestRetryDelay(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const base = 500 * time.Millisecond
	tooMany := func(retryAfter string) error {
		return &StatusError{StatusCode: http.StatusTooManyRequests, URL: "http://a.test/", RetryAfter: retryAfter}
	}
	tests := []struct {
		name string
		err  error
		n    int
		want time.Duration
	}{
		{name: "429 delta-seconds", err: tooMany("7"), want: 7 * time.Second},
		{name: "429 delta-seconds with space", err: tooMany(" 12 "), want: 12 * time.Second},
		{name: "429 HTTP-date", err: tooMany(now.Add(20 * time.Second).Format(http.TimeFormat)), want: 20 * time.Second},
		{name: "429 RFC 850 date", err: tooMany(now.Add(9 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT")), want: 9 * time.Second},
		{name: "429 delta-seconds over the cap", err: tooMany("3600"), want: MaxGetWait},
		{name: "429 huge delta-seconds", err: tooMany("99999999999999999999999"), want: MaxGetWait},
		{name: "429 HTTP-date over the cap", err: tooMany(now.Add(time.Hour).Format(http.TimeFormat)), want: MaxGetWait},
		{name: "429 wrapped", err: errors.Join(errors.New("context"), tooMany("4")), want: 4 * time.Second},
		{name: "429 without Retry-After uses the backoff", err: tooMany(""), n: 1, want: 500 * time.Millisecond},
		{name: "429 with a past date uses the backoff", err: tooMany(now.Add(-time.Minute).Format(http.TimeFormat)), want: 250 * time.Millisecond},
		{name: "429 with garbage uses the backoff", err: tooMany("soon"), want: 250 * time.Millisecond},
		{name: "503 Retry-After is left to the pacer", err: &StatusError{StatusCode: 503, RetryAfter: "7"}, want: 250 * time.Millisecond},
		{name: "network error", err: ErrNetwork, n: 2, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryDelay(tt.err, tt.n, base, now, 0); got != tt.want {
				t.Errorf("retryDelay = %s, want %s", got, tt.want)
			}
		})
	}
}
