package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// errRedisURL marks a Redis URL that cannot be used as given: a start-up
// error for the worker, a usage error for the operator subcommands.
var errRedisURL = errors.New("redis url")

// redisTarget is what a Redis URL says, read as the reference's redis-py
// reads one (redis.asyncio's from_url), so the URL an env file gives the
// reference means the same here: every parameter it takes is honoured or
// refused by name, never ignored.
type redisTarget struct {
	opt rueidis.ClientOption
	// db is the database selected: the db parameter, else the path.
	db int
	// notes say how a parameter is honoured when the client has no knob of
	// that name; the worker logs them.
	notes []string
}

// redisParams are the query parameters the URL may carry. Values are
// unquoted as redis-py unquotes them; a parameter given with an empty value
// is absent, as redis-py's parse_qs drops it.
var redisParams = map[string]func(t *redisTarget, tl *tlsParams, v string) error{
	"db": func(t *redisTarget, _ *tlsParams, v string) error {
		n, err := pythonInt(v)
		if err != nil || n < 0 {
			return errors.New("want a database number, 0 or more")
		}
		t.db = n
		return nil
	},
	"username": func(t *redisTarget, _ *tlsParams, v string) error {
		if t.opt.Username == "" { // the URL's userinfo wins, as in redis-py
			t.opt.Username = v
		}
		return nil
	},
	"password": func(t *redisTarget, _ *tlsParams, v string) error {
		if t.opt.Password == "" {
			t.opt.Password = v
		}
		return nil
	},
	"client_name": func(t *redisTarget, _ *tlsParams, v string) error {
		t.opt.ClientName = v
		return nil
	},
	"protocol": func(t *redisTarget, _ *tlsParams, v string) error {
		switch strings.TrimSpace(v) {
		case "2":
			t.opt.AlwaysRESP2 = true
		case "3": // the client's own choice
		default:
			return errors.New("want 2 or 3")
		}
		return nil
	},
	"socket_timeout": func(t *redisTarget, _ *tlsParams, v string) error {
		d, err := pythonSeconds(v)
		if err != nil {
			return err
		}
		t.opt.ConnWriteTimeout = d
		if t.opt.Dialer.Timeout == 0 { // redis-py connects within it too, unless told otherwise
			t.opt.Dialer.Timeout = d
		}
		return nil
	},
	"socket_connect_timeout": func(t *redisTarget, _ *tlsParams, v string) error {
		d, err := pythonSeconds(v)
		if err != nil {
			return err
		}
		t.opt.Dialer.Timeout = d
		return nil
	},
	"socket_keepalive": func(t *redisTarget, _ *tlsParams, v string) error {
		if !toBool(v) {
			t.opt.Dialer.KeepAlive = -1
		}
		return nil
	},
	"retry_on_timeout": func(t *redisTarget, _ *tlsParams, v string) error {
		t.opt.DisableRetry = !toBool(v)
		return nil
	},
	"max_connections": func(t *redisTarget, _ *tlsParams, v string) error {
		n, err := pythonInt(v)
		if err != nil || n < 0 {
			return errors.New("want a whole number, 0 (no bound) or more")
		}
		if n > 0 {
			// The pipelined connection is shared; this bounds the ones opened
			// for blocking reads.
			t.opt.BlockingPoolSize = n
		}
		return nil
	},
	"health_check_interval": func(t *redisTarget, _ *tlsParams, v string) error {
		if _, err := pythonInt(v); err != nil {
			return errors.New("want a whole number of seconds")
		}
		t.notes = append(t.notes, "health_check_interval: the client checks its connections itself, with background PINGs, so there is no interval to set")
		return nil
	},
	"addr": nil, // the project's Cluster seeds: handled with the host
	"ssl_cert_reqs": func(_ *redisTarget, tl *tlsParams, v string) error {
		switch v {
		case "none", "optional", "required":
			tl.certReqs = v
			return nil
		}
		return errors.New("want none, optional or required")
	},
	"ssl_check_hostname": func(_ *redisTarget, tl *tlsParams, v string) error {
		tl.checkHostname = toBool(v)
		return nil
	},
	"ssl_ca_certs": func(_ *redisTarget, tl *tlsParams, v string) error { tl.caFile = v; return nil },
	"ssl_ca_path":  func(_ *redisTarget, tl *tlsParams, v string) error { tl.caPath = v; return nil },
	"ssl_ca_data":  func(_ *redisTarget, tl *tlsParams, v string) error { tl.caData = v; return nil },
	"ssl_certfile": func(_ *redisTarget, tl *tlsParams, v string) error { tl.certFile = v; return nil },
	"ssl_keyfile":  func(_ *redisTarget, tl *tlsParams, v string) error { tl.keyFile = v; return nil },
}

// refusedRedisParams are parameters redis-py reads that this client cannot
// honour, each with why.
var refusedRedisParams = map[string]string{
	"ssl_password":             "encrypted private keys are not supported: give ssl_keyfile a decrypted key, readable by the worker alone",
	"ssl_ciphers":              "OpenSSL cipher strings have no meaning to Go's TLS, which negotiates among its own safe suites",
	"ssl_min_version":          "TLS 1.2 is already the least accepted, and redis-py cannot read a version from a URL either",
	"ssl_include_verify_flags": "OpenSSL verification flags have no meaning to Go's TLS",
	"ssl_exclude_verify_flags": "OpenSSL verification flags have no meaning to Go's TLS",
	"timeout":                  "it is the wait for a free connection of redis-py's blocking pool, which from_url does not use: the reference cannot connect with it either",
	"readonly":                 "the worker writes: a read-only connection could not ack, publish or dead-letter",
}

// tlsParams are a rediss:// URL's TLS parameters, with redis-py's defaults.
type tlsParams struct {
	given                                     []string // the ssl_* names given
	certReqs                                  string
	checkHostname                             bool
	caFile, caPath, caData, certFile, keyFile string
}

// parseRedisURL reads a redis://, rediss:// or unix:// URL the way the
// reference's redis-py does. Errors wrap errRedisURL, name the parameter
// and never carry the URL or a password.
func parseRedisURL(raw string) (*redisTarget, error) {
	fail := func(format string, a ...any) (*redisTarget, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{errRedisURL}, a...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("does not parse")
	}
	t := &redisTarget{}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return fail("want a redis://, rediss:// or unix:// URL")
	}
	if u.User != nil {
		t.opt.Username = u.User.Username()
		t.opt.Password, _ = u.User.Password()
	}
	tl := &tlsParams{certReqs: "required", checkHostname: true}
	seen := map[string]string{}
	var seeds []string
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		rawName, rawValue, _ := strings.Cut(part, "=")
		name, value := pyUnquotePlus(rawName), pyUnquote(pyUnquotePlus(rawValue))
		if part == "" {
			continue
		}
		if why, ok := refusedRedisParams[name]; ok {
			return fail("parameter %s is not supported here: %s", name, why)
		}
		set, known := redisParams[name]
		if !known {
			return fail("unknown parameter %q", truncateName(name))
		}
		if name == "addr" {
			if value != "" {
				seeds = append(seeds, value)
			}
			continue
		}
		if value == "" {
			continue // as redis-py's parse_qs drops it
		}
		if prev, dup := seen[name]; dup {
			if prev != value {
				return fail("parameter %s given twice, with different values", name)
			}
			continue
		}
		seen[name] = value
		if strings.HasPrefix(name, "ssl_") {
			tl.given = append(tl.given, name)
		}
		if err := set(t, tl, value); err != nil {
			return fail("parameter %s: %v", name, err)
		}
	}
	if len(tl.given) > 0 && u.Scheme != "rediss" {
		return fail("parameter %s needs a rediss:// URL: redis-py passes it to no plain connection either", tl.given[0])
	}

	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return fail("unix:// needs the socket's path")
		}
		if len(seeds) > 0 {
			return fail("parameter addr names Cluster seeds, which a unix:// URL cannot reach")
		}
		t.opt.InitAddress = []string{u.Path}
		t.opt.DialCtxFn = unixDialer
	default:
		host := u.Hostname()
		if host == "" {
			host = "localhost"
		}
		port := u.Port()
		if port == "" {
			port = "6379"
		}
		t.opt.InitAddress = []string{net.JoinHostPort(host, port)}
		for _, s := range seeds {
			h, p, err := net.SplitHostPort(s)
			if err != nil {
				h, p = s, "6379"
			}
			if h == "" {
				h = host
			}
			t.opt.InitAddress = append(t.opt.InitAddress, net.JoinHostPort(h, p))
		}
		if _, given := seen["db"]; !given {
			// redis-py reads the path as the database when no db parameter
			// says otherwise; a path that is no number is refused here, not
			// read as database 0.
			p := strings.ReplaceAll(pyUnquote(u.EscapedPath()), "/", "")
			if p != "" {
				n, err := pythonInt(p)
				if err != nil || n < 0 {
					return fail("path %q is not a database number", truncateName(u.Path))
				}
				t.db = n
			}
		}
		if u.Scheme == "rediss" {
			cfg, err := tl.config(host)
			if err != nil {
				return fail("%v", err)
			}
			t.opt.TLSConfig = cfg
		}
	}
	t.opt.SelectDB = t.db
	return t, nil
}

// config builds the TLS configuration redis-py's SSLConnection would use:
// the system roots plus any CA given, the chain verified unless
// ssl_cert_reqs=none ("optional" verifies too: a client is always sent a
// certificate), the host name checked unless ssl_check_hostname is false,
// and a client certificate when given.
func (p *tlsParams) config(host string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if p.keyFile != "" && p.certFile == "" {
		return nil, errors.New("parameter ssl_keyfile needs ssl_certfile")
	}
	if p.certFile != "" {
		key := p.keyFile
		if key == "" {
			key = p.certFile // the key in the certificate's file, as redis-py allows
		}
		pair, err := tls.LoadX509KeyPair(p.certFile, key)
		if err != nil {
			return nil, fmt.Errorf("parameters ssl_certfile/ssl_keyfile: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if p.certReqs == "none" {
		cfg.InsecureSkipVerify = true
		return cfg, nil
	}
	if p.caFile != "" || p.caPath != "" || p.caData != "" {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if p.caFile != "" {
			b, err := os.ReadFile(p.caFile)
			if err != nil {
				return nil, fmt.Errorf("parameter ssl_ca_certs: %w", err)
			}
			if !roots.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("parameter ssl_ca_certs: %s holds no PEM certificate", p.caFile)
			}
		}
		if p.caPath != "" {
			if err := appendCADir(roots, p.caPath); err != nil {
				return nil, fmt.Errorf("parameter ssl_ca_path: %w", err)
			}
		}
		if p.caData != "" && !roots.AppendCertsFromPEM([]byte(p.caData)) {
			return nil, errors.New("parameter ssl_ca_data: no PEM certificate in it")
		}
		cfg.RootCAs = roots
	}
	if !p.checkHostname {
		// The chain is still verified, against the same roots, without
		// the name: Go has no switch for that alone.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("redis: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// appendCADir adds every PEM certificate of the files in dir, as OpenSSL's
// CA path serves them.
func appendCADir(roots *x509.CertPool, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && roots.AppendCertsFromPEM(b) {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%s holds no PEM certificate", dir)
	}
	return nil
}

// unixDialer dials a unix:// URL's socket.
func unixDialer(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	return d.DialContext(ctx, "unix", addr)
}

// pythonIntSyntax is what Python's int() takes from text, ASCII digits
// only: surrounding white space, a sign, single underscores between digits.
var pythonIntSyntax = regexp.MustCompile(`^[+-]?[0-9](_?[0-9])*$`)

func pythonInt(v string) (int, error) {
	v = strings.TrimSpace(v)
	if !pythonIntSyntax.MatchString(v) {
		return 0, errNotInt
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimPrefix(v, "+"), "_", ""), 10, 32)
	if err != nil {
		return 0, errIntRange
	}
	return int(n), nil
}

// pythonSeconds reads a socket timeout as Python's float() does, refusing
// what would be no timeout at all or one that fails every operation.
func pythonSeconds(v string) (time.Duration, error) {
	f, err := pyFloat(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, errors.New("want a number of seconds")
	case math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > maxSettingSeconds:
		return 0, errors.New("want a positive, finite number of seconds")
	}
	return max(time.Duration(f*float64(time.Second)), time.Millisecond), nil
}

// toBool is redis-py's to_bool: 0, F, FALSE, N and NO (any case) are false,
// anything else true.
func toBool(v string) bool {
	switch strings.ToUpper(v) {
	case "0", "F", "FALSE", "N", "NO":
		return false
	}
	return true
}

// pyUnquote is Python's urllib.parse.unquote: %XX sequences decoded,
// malformed ones left as they are.
func pyUnquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pyUnquotePlus is unquote_plus, as parse_qs applies it: + is a space.
func pyUnquotePlus(s string) string { return pyUnquote(strings.ReplaceAll(s, "+", " ")) }

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// truncateName keeps an error about an odd parameter short.
func truncateName(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
