package guard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
)

func TestASCIIHost(t *testing.T) {
	tests := []struct {
		host    string
		want    string
		wantErr bool
	}{
		// ASCII is left alone, as net/http leaves it: case, underscores,
		// dots and broken punycode included.
		{host: "example.test", want: "example.test"},
		{host: "MiXeD.Test.", want: "MiXeD.Test."},
		{host: "_srv.a_b.test", want: "_srv.a_b.test"},
		{host: "xn--zz.test", want: "xn--zz.test"},
		{host: "127.0.0.1", want: "127.0.0.1"},
		{host: "fe80::1%eth0", want: "fe80::1%eth0"},
		{host: "", want: ""},
		// Unicode goes through the IDNA Lookup profile.
		{host: "bücher.test", want: "xn--bcher-kva.test"},
		{host: "BÜCHER.test.", want: "xn--bcher-kva.test."},
		{host: "ß.test", want: "xn--zca.test"},
		{host: "ｌｏｃａｌｈｏｓｔ", want: "localhost"},
		{host: "𝟏𝟐𝟕.𝟎.𝟎.𝟏", want: "127.0.0.1"},
		{host: "①②⑦.0.0.1", want: "127.0.0.1"},
		{host: "１２７。０。０。１", want: "127.0.0.1"},
		{host: "Ⅻ.test", want: "xii.test"},
		// No ASCII form.
		{host: "bücher-.test", wantErr: true},
		{host: "a_b.bücher.test", wantErr: true},
		{host: "bücher.test:80", wantErr: true},
		{host: "[bücher.test]", wantErr: true},
		{host: "\u200d", wantErr: true},
		{host: "\u00ad", wantErr: true},
		{host: "ü.xn--zz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, err := guard.ASCIIHost(tt.host)
			if tt.wantErr {
				if !errors.Is(err, guard.ErrInvalidHost) || errors.Is(err, guard.ErrRefused) || errors.Is(err, guard.ErrResolve) {
					t.Fatalf("ASCIIHost(%q) = %q, %v; want an error wrapping only ErrInvalidHost", tt.host, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ASCIIHost(%q) = %q, %v; want %q", tt.host, got, err, tt.want)
			}
		})
	}
}

// errDialed stops a request at its dial, once the address is recorded.
var errDialed = errors.New("dial recorded")

// TestASCIIHostIsWhatNetHTTPDials asks net/http itself which name it dials
// for a URL and checks that the guard judges that same name.
func TestASCIIHostIsWhatNetHTTPDials(t *testing.T) {
	hosts := []string{
		"bücher.test", "BÜCHER.test", "ｌｏｃａｌｈｏｓｔ", "𝟏𝟐𝟕.𝟎.𝟎.𝟏", "①②⑦.0.0.1",
		"１２７。０。０。１", "０Ｘ７Ｆ.１", "MiXeD.test", "Öffentlich.test", "Ⅻ.test",
	}
	dials := make(chan string, 1)
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(_ context.Context, _, address string) (net.Conn, error) {
			dials <- address
			return nil, errDialed
		},
	}}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			u := &url.URL{Scheme: "http", Host: host, Path: "/"}
			req, err := http.NewRequest(http.MethodGet, u.String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Do(req); !errors.Is(err, errDialed) {
				t.Fatalf("request for %s was not stopped at the dial: %v", u, err)
			}
			dialed := <-dials
			dialHost, _, err := net.SplitHostPort(dialed)
			if err != nil {
				t.Fatalf("dialed %q: %v", dialed, err)
			}
			name, err := guard.ASCIIHost(req.URL.Hostname())
			if err != nil || name != dialHost {
				t.Fatalf("ASCIIHost(%q) = %q, %v; net/http dialed %q", req.URL.Hostname(), name, err, dialHost)
			}
		})
	}
}

// A Unicode name the fetcher's transport dials through the guard reaches an
// allowed origin under its ASCII name, and the pre-check agrees.
func TestIDNThroughDialContext(t *testing.T) {
	o := newOrigin(t)
	resolver := hosts.Resolver{Table: map[string][]netip.Addr{"xn--bcher-kva.test": {netip.MustParseAddr("127.0.0.1")}}}
	allowed := guard.New(guard.Options{Resolver: resolver, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	strict := guard.New(guard.Options{Resolver: resolver})
	raw := "http://bücher.test:" + o.port() + "/"
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := allowed.CheckURL(context.Background(), u); err != nil {
		t.Fatalf("allowed CheckURL(%s) = %v", raw, err)
	}
	if err := get(t, client(allowed), raw); err != nil {
		t.Fatalf("allowed GET %s: %v", raw, err)
	}
	if err := strict.CheckURL(context.Background(), u); !errors.Is(err, guard.ErrRefused) {
		t.Fatalf("strict CheckURL(%s) = %v, want a refusal", raw, err)
	}
	if err := get(t, client(strict), raw); !errors.Is(err, guard.ErrRefused) {
		t.Fatalf("strict GET %s = %v, want a refusal", raw, err)
	}
	if n := o.Hits(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}
