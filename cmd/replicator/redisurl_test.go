package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

// ping connects with rawURL as the binary does and sends one PING.
func ping(t *testing.T, rawURL string) error {
	t.Helper()
	c, err := newRedisClient(rawURL)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// TestRedisURLOverTLS runs redis-py's TLS parameters against real
// redis-servers listening with TLS only, with a CA and certificates made
// for the test: the chain is verified unless ssl_cert_reqs=none, against
// the CA ssl_ca_certs, ssl_ca_path or ssl_ca_data names; the host name
// unless ssl_check_hostname is false; a client certificate is presented
// from ssl_certfile and ssl_keyfile.
func TestRedisURLOverTLS(t *testing.T) {
	plain := testenv.StartRedisTLS(t, testenv.TLSOptions{})
	mutual := testenv.StartRedisTLS(t, testenv.TLSOptions{AuthClients: "yes"})
	misnamed := testenv.StartRedisTLS(t, testenv.TLSOptions{Names: []string{"redis.test"}})

	caDir := t.TempDir()
	ca, err := os.ReadFile(plain.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(caDir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	combined := filepath.Join(t.TempDir(), "client-and-key.pem")
	cert, _ := os.ReadFile(mutual.TLS.ClientCertFile)
	key, _ := os.ReadFile(mutual.TLS.ClientKeyFile)
	if err := os.WriteFile(combined, append(cert, key...), 0o600); err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape
	tests := []struct {
		name   string
		server *testenv.Redis
		query  string
		wantOK bool
	}{
		{name: "no CA: the system roots do not know the test's", server: plain, query: ""},
		{name: "ssl_ca_certs", server: plain, query: "ssl_ca_certs=" + q(plain.TLS.CAFile), wantOK: true},
		{name: "ssl_ca_path", server: plain, query: "ssl_ca_path=" + q(caDir), wantOK: true},
		{name: "ssl_ca_data", server: plain, query: "ssl_ca_data=" + q(string(ca)), wantOK: true},
		{name: "ssl_cert_reqs=none verifies nothing", server: plain, query: "ssl_cert_reqs=none", wantOK: true},
		{name: "ssl_cert_reqs=optional verifies as required", server: plain, query: "ssl_cert_reqs=optional"},
		{name: "ssl_cert_reqs=required with the CA", server: plain, query: "ssl_cert_reqs=required&ssl_ca_certs=" + q(plain.TLS.CAFile), wantOK: true},
		{name: "another server's CA", server: mutual, query: "ssl_ca_certs=" + q(plain.TLS.CAFile)},
		{name: "client certificate required, none given", server: mutual, query: "ssl_ca_certs=" + q(mutual.TLS.CAFile)},
		{name: "client certificate from ssl_certfile and ssl_keyfile", server: mutual,
			query: "ssl_ca_certs=" + q(mutual.TLS.CAFile) + "&ssl_certfile=" + q(mutual.TLS.ClientCertFile) + "&ssl_keyfile=" + q(mutual.TLS.ClientKeyFile), wantOK: true},
		{name: "client certificate and key in one file", server: mutual,
			query: "ssl_ca_certs=" + q(mutual.TLS.CAFile) + "&ssl_certfile=" + q(combined), wantOK: true},
		{name: "a certificate for another name", server: misnamed, query: "ssl_ca_certs=" + q(misnamed.TLS.CAFile)},
		{name: "ssl_check_hostname=false still verifies the chain", server: misnamed,
			query: "ssl_check_hostname=false&ssl_ca_certs=" + q(plain.TLS.CAFile)},
		{name: "ssl_check_hostname=False accepts another name", server: misnamed,
			query: "ssl_check_hostname=False&ssl_ca_certs=" + q(misnamed.TLS.CAFile), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := "rediss://" + tt.server.Addr + "/0"
			if tt.query != "" {
				u += "?" + tt.query
			}
			err := ping(t, u)
			if tt.wantOK && err != nil {
				t.Fatalf("PING over %s: %v", tt.name, err)
			}
			if !tt.wantOK && err == nil {
				t.Fatalf("PING succeeded; want the TLS handshake refused")
			}
			if err != nil && errors.Is(err, errRedisURL) {
				t.Fatalf("the URL itself was refused: %v", err)
			}
		})
	}
}

// TestRedisURLDatabaseAndClientName: db and client_name reach the server.
func TestRedisURLDatabaseAndClientName(t *testing.T) {
	srv := testenv.StartRedis(t)
	c, err := newRedisClient("redis://" + srv.Addr + "/0?db=3&client_name=replicator-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("in db 3").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	list, err := c.Do(ctx, c.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "name=replicator-test") || !strings.Contains(list, "db=3") {
		t.Errorf("CLIENT LIST does not show the name and database:\n%s", list)
	}
	db3, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, SelectDB: 3, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if got, err := db3.Do(ctx, db3.B().Get().Key("k").Build()).ToString(); err != nil || got != "in db 3" {
		t.Errorf("GET k in db 3 = %q, %v", got, err)
	}
}

// TestParseRedisURL: what redis-py reads from a URL, read the same way, and
// everything else refused by name, without the password.
func TestParseRedisURL(t *testing.T) {
	good := []struct {
		name  string
		url   string
		check func(t *testing.T, rt *redisTarget)
	}{
		{name: "db parameter over the path", url: "redis://h:7/1?db=4", check: func(t *testing.T, rt *redisTarget) {
			if rt.db != 4 || rt.opt.SelectDB != 4 {
				t.Errorf("db = %d, SelectDB = %d; want 4", rt.db, rt.opt.SelectDB)
			}
		}},
		{name: "path database, Python's int forms", url: "redis://h/+1_2", check: func(t *testing.T, rt *redisTarget) {
			if rt.db != 12 {
				t.Errorf("db = %d, want 12", rt.db)
			}
		}},
		{name: "no path is database 0", url: "rediss://h", check: func(t *testing.T, rt *redisTarget) {
			if rt.db != 0 || rt.opt.InitAddress[0] != "h:6379" || rt.opt.TLSConfig == nil || rt.opt.TLSConfig.ServerName != "h" {
				t.Errorf("db %d, address %v, TLS %+v", rt.db, rt.opt.InitAddress, rt.opt.TLSConfig)
			}
		}},
		{name: "credentials from the query, userinfo winning", url: "redis://u1:p1@h/0?username=u2&password=p2", check: func(t *testing.T, rt *redisTarget) {
			if rt.opt.Username != "u1" || rt.opt.Password != "p1" {
				t.Errorf("username %q, password %q; want the userinfo's", rt.opt.Username, rt.opt.Password)
			}
		}},
		{name: "credentials from the query alone", url: "unix:///run/redis.sock?db=2&password=p%2B2", check: func(t *testing.T, rt *redisTarget) {
			if rt.opt.Password != "p+2" || rt.db != 2 || rt.opt.InitAddress[0] != "/run/redis.sock" || rt.opt.DialCtxFn == nil {
				t.Errorf("password %q, db %d, address %v", rt.opt.Password, rt.db, rt.opt.InitAddress)
			}
		}},
		{name: "client options", url: "redis://h/0?client_name=worker+one&protocol=2&socket_timeout=2.5&socket_connect_timeout=1&socket_keepalive=no&retry_on_timeout=false&max_connections=8",
			check: func(t *testing.T, rt *redisTarget) {
				o := rt.opt
				if o.ClientName != "worker one" || !o.AlwaysRESP2 || o.ConnWriteTimeout != 2500*time.Millisecond ||
					o.Dialer.Timeout != time.Second || o.Dialer.KeepAlive != -1 || !o.DisableRetry || o.BlockingPoolSize != 8 {
					t.Errorf("options = %+v", o)
				}
			}},
		{name: "socket_timeout bounds the connect too", url: "redis://h/0?socket_timeout=3", check: func(t *testing.T, rt *redisTarget) {
			if rt.opt.Dialer.Timeout != 3*time.Second {
				t.Errorf("dial timeout = %v, want 3s", rt.opt.Dialer.Timeout)
			}
		}},
		{name: "health_check_interval is noted", url: "redis://h/0?health_check_interval=30", check: func(t *testing.T, rt *redisTarget) {
			if len(rt.notes) != 1 || !strings.Contains(rt.notes[0], "health_check_interval") {
				t.Errorf("notes = %q", rt.notes)
			}
		}},
		{name: "blank values are absent, as parse_qs drops them", url: "redis://h/5?db=&client_name=", check: func(t *testing.T, rt *redisTarget) {
			if rt.db != 5 || rt.opt.ClientName != "" {
				t.Errorf("db %d, client name %q", rt.db, rt.opt.ClientName)
			}
		}},
		{name: "Cluster seeds", url: "redis://10.0.0.1:7000/0?addr=10.0.0.2:7001&addr=10.0.0.3", check: func(t *testing.T, rt *redisTarget) {
			want := []string{"10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:6379"}
			if strings.Join(rt.opt.InitAddress, ",") != strings.Join(want, ",") {
				t.Errorf("addresses %v, want %v", rt.opt.InitAddress, want)
			}
		}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := parseRedisURL(tt.url)
			if err != nil {
				t.Fatalf("parseRedisURL: %v", err)
			}
			tt.check(t, rt)
		})
	}
	bad := []struct {
		url  string
		want string
	}{
		{url: "redis://:hunter2@h/0?dial_timeout=5s", want: `unknown parameter "dial_timeout"`},
		{url: "redis://:hunter2@h/0?ssl_cert_reqs=none", want: "ssl_cert_reqs needs a rediss:// URL"},
		{url: "rediss://:hunter2@h/0?ssl_cert_reqs=CERT_NONE", want: "want none, optional or required"},
		{url: "rediss://:hunter2@h/0?ssl_password=hunter2", want: "ssl_password is not supported here"},
		{url: "rediss://:hunter2@h/0?ssl_ciphers=HIGH", want: "ssl_ciphers is not supported here"},
		{url: "rediss://:hunter2@h/0?ssl_keyfile=/k.pem", want: "ssl_keyfile needs ssl_certfile"},
		{url: "rediss://:hunter2@h/0?ssl_ca_certs=/nonexistent/ca.pem", want: "parameter ssl_ca_certs"},
		{url: "redis://:hunter2@h/0?timeout=5", want: "timeout is not supported here"},
		{url: "redis://:hunter2@h/abc", want: "is not a database number"},
		{url: "redis://:hunter2@h/0?db=-1", want: "parameter db"},
		{url: "redis://:hunter2@h/0?db=1&db=2", want: "db given twice"},
		{url: "redis://:hunter2@h/0?protocol=4", want: "parameter protocol"},
		{url: "redis://:hunter2@h/0?socket_timeout=inf", want: "parameter socket_timeout"},
		{url: "http://:hunter2@h/0", want: "want a redis://, rediss:// or unix:// URL"},
	}
	for _, tt := range bad {
		t.Run(tt.want, func(t *testing.T) {
			_, err := parseRedisURL(tt.url)
			if !errors.Is(err, errRedisURL) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseRedisURL(%q) = %v, want an error saying %q", tt.url, err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q carries the password", err)
			}
		})
	}
}

// FuzzRedisURL: any URL either parses to a usable target or fails with
// errRedisURL, never panics, and never repeats a password in an error.
func FuzzRedisURL(f *testing.F) {
	for _, seed := range []string{
		"redis://localhost:6379/0",                         // the default
		"rediss://u:pw@h:6380/2?ssl_cert_reqs=none",        // TLS, not verified
		"redis://h/0?db=3&client_name=a+b",                 // parameters
		"unix:///run/redis.sock?db=1&password=p%25w",       // a socket, double unquoting
		"redis://h:7000/0?addr=h2:7001&addr=h3:7002",       // Cluster seeds
		"redis://h/0?db=&x",                                // blank and bare parameters
		"redis://h/%zz?db=1",                               // a malformed escape
		"redis://[::1]:6379/0?socket_timeout=1e3",          // IPv6, an exponent
		"rediss://h/0?ssl_check_hostname=NO&ssl_ca_data=x", // not PEM
		"redis://h/0;db=1",                                 // a semicolon
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		rt, err := parseRedisURL(raw)
		if err != nil {
			if !errors.Is(err, errRedisURL) {
				t.Fatalf("error %v does not wrap errRedisURL", err)
			}
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(err.Error(), pw) {
					t.Fatalf("error %q carries the password %q", err, pw)
				}
			}
			return
		}
		if rt.db < 0 || len(rt.opt.InitAddress) == 0 {
			t.Fatalf("parsed %q to db %d, addresses %v", raw, rt.db, rt.opt.InitAddress)
		}
	})
}

// TestWorkerOverTLS: the binary takes a rediss:// URL with redis-py's TLS
// parameters from REPLICATOR_REDIS_URL, boots against a server that
// requires a client certificate and handles a command; an unknown
// parameter stops it at start-up (exit 2), naming the parameter.
func TestWorkerOverTLS(t *testing.T) {
	srv := testenv.StartRedisTLS(t, testenv.TLSOptions{AuthClients: "yes"})
	q := url.QueryEscape
	redisURL := srv.URL() + "?ssl_cert_reqs=required&ssl_ca_certs=" + q(srv.TLS.CAFile) +
		"&ssl_certfile=" + q(srv.TLS.ClientCertFile) + "&ssl_keyfile=" + q(srv.TLS.ClientKeyFile)

	r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + redisURL + "&ssl_verify=yes"}, "worker")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown parameter "ssl_verify"`) {
		t.Errorf("unknown parameter: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	origin := testenv.StartOrigin(t, testenv.Status(200, map[string]string{"Content-Type": "text/plain"}, "over tls\n"))
	w := startBinary(t, []string{
		"REPLICATOR_REDIS_URL=" + redisURL,
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_BLOB_DIR=" + t.TempDir(),
		"REPLICATOR_CONSUMER_START_ID=0",
		"REPLICATOR_READ_BLOCK_MS=200",
	}, "worker")
	r = runBinary(t, nil, "seed", "--redis-url", redisURL, "--production", "--info-source-id", "src-tls",
		"--watch", "--watch-timeout", "30s", origin.URL+"/doc")
	if r.code != 0 || !strings.Contains(r.stdout, "blob_available") {
		t.Fatalf("seed --watch over TLS: exit %d\nstdout:\n%s\nstderr:\n%s\nworker:\n%s", r.code, r.stdout, r.stderr, tail(w.stderr.String(), 3000))
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
}
