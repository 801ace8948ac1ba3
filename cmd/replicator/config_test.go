package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoadConfigEverySetting(t *testing.T) {
	tests := []struct {
		variable string
		get      func(Config) any
		def      any      // value with the variable unset
		blank    any      // value with the variable set but blank, or refused
		good     string   // a valid non-default value
		goodWant any      // what good parses to
		bad      []string // each must fail naming the variable and value
	}{
		{variable: "REPLICATOR_REDIS_URL", get: func(c Config) any { return c.RedisURL },
			def: "redis://localhost:6379/0", blank: refused, good: "redis://127.0.0.1:7000/2?addr=127.0.0.1:7001", goodWant: "redis://127.0.0.1:7000/2?addr=127.0.0.1:7001",
			bad: []string{"http://example.com/", "localhost:6379"}},
		{variable: "REPLICATOR_BLOB_BACKEND", get: func(c Config) any { return c.BlobBackend },
			def: "local", blank: refused, good: "gcs", goodWant: "gcs",
			bad: []string{"s3", "LOCAL", "gcs " + "x"}},
		{variable: "REPLICATOR_BLOB_DIR", get: func(c Config) any { return c.BlobDir },
			def: "blobs", blank: ".", good: "/var/lib/replicator/blobs", goodWant: "/var/lib/replicator/blobs"},
		{variable: "REPLICATOR_BLOB_BUCKET", get: func(c Config) any { return c.BlobBucket },
			def: "", blank: "", good: "temp-blobs", goodWant: "temp-blobs"},
		{variable: "REPLICATOR_BLOB_PREFIX", get: func(c Config) any { return c.BlobPrefix },
			def: "blobs", blank: "", good: "/fetched/blobs/", goodWant: "fetched/blobs"},
		{variable: "REPLICATOR_BLOB_TIMEOUT_SECONDS", get: func(c Config) any { return c.BlobTimeout },
			def: 30 * time.Second, blank: refused, good: "2.5", goodWant: 2500 * time.Millisecond,
			bad: []string{"1e-10", "5e-7", "0", "-1", "abc", "NaN", "inf", "1e12"}},
		{variable: "REPLICATOR_BLOB_TTL_SECONDS", get: func(c Config) any { return c.BlobTTL },
			def: 604800 * time.Second, blank: refused, good: "3600", goodWant: time.Hour,
			bad: []string{"1e-10", "5e-7", "0", "315360001", "seven days"}},
		{variable: "REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS", get: func(c Config) any { return c.BlobSweepInterval },
			def: 900 * time.Second, blank: refused, good: "60", goodWant: time.Minute,
			bad: []string{"1e-10", "5e-7", "0", "-5", "15m"}},
		{variable: "REPLICATOR_BLOB_TEMP_GRACE_SECONDS", get: func(c Config) any { return c.BlobTempGrace },
			def: 3600 * time.Second, blank: refused, good: "120", goodWant: 2 * time.Minute,
			bad: []string{"1e-10", "5e-7", "0", "x"}},
		{variable: "REPLICATOR_BLOB_MAX_TOTAL_BYTES", get: func(c Config) any { return c.BlobMaxTotalBytes },
			def: int64(2 << 30), blank: refused, good: "1048576", goodWant: int64(1 << 20),
			bad: []string{"0", "-1", "1.5", "2GiB"}},
		{variable: "REPLICATOR_CONSUMER_GROUP", get: func(c Config) any { return c.ConsumerGroup },
			def: "replicator.fetch", blank: refused, good: "replicator.fetch.blue", goodWant: "replicator.fetch.blue"},
		{variable: "REPLICATOR_REPLICATE_CONSUMER_GROUP", get: func(c Config) any { return c.ReplicateConsumerGroup },
			def: "replicator.replicate", blank: refused, good: "replicator.replicate.blue", goodWant: "replicator.replicate.blue"},
		{variable: "REPLICATOR_REPLICATION_ALIASES_FILE", get: func(c Config) any { return c.ReplicationAliasesFile },
			def: "", blank: "", good: "/etc/replicator/aliases.json", goodWant: "/etc/replicator/aliases.json"},
		{variable: "REPLICATOR_REPLICATE_WRITE_TIMEOUT_SECONDS", get: func(c Config) any { return c.ReplicateWriteTimeout },
			def: 120 * time.Second, blank: refused, good: "300", goodWant: 300 * time.Second,
			bad: []string{"0", "-1", "2.5", "inf", "two minutes"}},
		{variable: "REPLICATOR_PERMANENT_BUCKET", get: func(c Config) any { return c.PermanentBucket },
			def: "", blank: "", good: "co-gcs-replicator", goodWant: "co-gcs-replicator"},
		{variable: "REPLICATOR_CONSUMER_NAME", get: func(c Config) any { return c.ConsumerName },
			def: "replicator-fetch-1", blank: "replicator-fetch-1", good: "replicator-fetch-2", goodWant: "replicator-fetch-2"},
		{variable: "REPLICATOR_REPLICATE_CONSUMER_NAME", get: func(c Config) any { return c.ReplicateConsumerName },
			def: "replicator-replicate-1", blank: "replicator-replicate-1", good: "replicator-replicate-2", goodWant: "replicator-replicate-2"},
		{variable: "REPLICATOR_CONSUMER_START_ID", get: func(c Config) any { return c.ConsumerStartID },
			def: "$", blank: refused, good: "0", goodWant: "0",
			bad: []string{"latest", "1-2-3", "-1"}},
		{variable: "REPLICATOR_READ_BLOCK_MS", get: func(c Config) any { return c.ReadBlock },
			def: 5 * time.Second, blank: refused, good: "250", goodWant: 250 * time.Millisecond,
			bad: []string{"abc", "0", "-1", "1.5", "5s"}},
		{variable: "REPLICATOR_CLAIM_MIN_IDLE_MS", get: func(c Config) any { return c.ClaimMinIdle },
			def: time.Minute, blank: refused, good: "1500", goodWant: 1500 * time.Millisecond,
			bad: []string{"0", "sixty"}},
		{variable: "REPLICATOR_MAX_DELIVERY_ATTEMPTS", get: func(c Config) any { return c.MaxDeliveryAttempts },
			def: 5, blank: refused, good: "3", goodWant: 3,
			bad: []string{"three", "3.5", "1e3", "0x3"}},
		{variable: "REPLICATOR_ERROR_BACKOFF_BASE_SECONDS", get: func(c Config) any { return c.ErrorBackoffBase },
			def: time.Second, blank: refused, good: "0.5", goodWant: 500 * time.Millisecond,
			bad: []string{"1e-10", "5e-7", "0", "-1", "fast"}},
		{variable: "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS", get: func(c Config) any { return c.ErrorBackoffMax },
			def: 30 * time.Second, blank: refused, good: "10", goodWant: 10 * time.Second,
			bad: []string{"1e-10", "5e-7", "0", "inf", "x"}},
		{variable: "REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES", get: func(c Config) any { return c.MaxConsecutiveCycleFailures },
			def: 20, blank: refused, good: "3", goodWant: 3,
			bad: []string{"many", "1.5"}},
		{variable: "REPLICATOR_DEDUPE_TTL_SECONDS", get: func(c Config) any { return c.DedupeTTL },
			def: 24 * time.Hour, blank: refused, good: "60", goodWant: time.Minute,
			bad: []string{"0", "60.5", "315360001"}},
		{variable: "REPLICATOR_MAX_BLOB_BYTES", get: func(c Config) any { return c.MaxBlobBytes },
			def: int64(64 << 20), blank: refused, good: "1024", goodWant: int64(1024),
			bad: []string{"0", "64MiB"}},
		{variable: "REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", get: func(c Config) any { return c.MaxFetchTimeout },
			def: 120 * time.Second, blank: refused, good: "60", goodWant: time.Minute,
			bad: []string{"1e-10", "5e-7", "0", "-1", "inf", "nan"}},
		{variable: "REPLICATOR_MAX_FETCH_SECONDS", get: func(c Config) any { return c.MaxFetchTime },
			def: 120 * time.Second, blank: refused, good: "300", goodWant: 5 * time.Minute,
			bad: []string{"1e-10", "5e-7", "0", "2m"}},
		{variable: "REPLICATOR_BLOCKED_DESTINATIONS", get: func(c Config) any { return c.BlockedDestinations },
			def: []netip.Prefix(nil), blank: refused, good: "127.0.0.0/8, ::1, 203.0.113.0/24",
			goodWant: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("203.0.113.0/24")},
			bad:      []string{",", ",,", "10.0.0.1/8", "10.0.0.0/33", "localhost", "fe80::1%eth0"}},
		{variable: "REPLICATOR_PERSIST_ENABLED", get: func(c Config) any { return c.PersistEnabled },
			def: false, blank: refused, good: "On", goodWant: true,
			bad: []string{"maybe", "2", "enabled"}},
		{variable: "REPLICATOR_MIN_HOST_INTERVAL_SECONDS", get: func(c Config) any { return c.MinHostInterval },
			def: time.Second, blank: refused, good: "0", goodWant: time.Duration(0),
			bad: []string{"1e-10", "5e-7", "-0.1", "3601", "NaN", "one"}},
		{variable: "REPLICATOR_LOG_LEVEL", get: func(c Config) any { return c.LogLevel },
			def: slog.LevelInfo, blank: slog.LevelInfo, good: "warning", goodWant: slog.LevelWarn},
		{variable: "REPLICATOR_CONCURRENCY", get: func(c Config) any { return c.Concurrency },
			def: 16, blank: refused, good: "64", goodWant: 64,
			bad: []string{"0", "-1", "lots"}},
		{variable: "REPLICATOR_MAX_HELD", get: func(c Config) any { return c.MaxHeld },
			def: 0, blank: refused, good: "1", goodWant: 1,
			bad: []string{"0", "-1", "all"}},
		{variable: "REPLICATOR_ALLOW_CIDRS", get: func(c Config) any { return c.AllowCIDRs },
			def: []netip.Prefix(nil), blank: []netip.Prefix(nil), good: "127.0.0.0/8, 10.1.2.3", goodWant: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.2.3/32")},
			bad: []string{"127.0.0.0/33", "localhost"}},
		{variable: "REPLICATOR_EGRESS_PROXY_CIDRS", get: func(c Config) any { return c.EgressProxyCIDRs },
			def: []netip.Prefix(nil), blank: []netip.Prefix(nil), good: "10.0.0.8/32 10.0.1.0/24", goodWant: []netip.Prefix{netip.MustParsePrefix("10.0.0.8/32"), netip.MustParsePrefix("10.0.1.0/24")},
			bad: []string{"10.0.0.0/33", "proxy.internal"}},
		{variable: "REPLICATOR_METRICS_ADDR", get: func(c Config) any { return c.MetricsAddr },
			def: "", blank: "", good: "127.0.0.1:9464", goodWant: "127.0.0.1:9464",
			bad: []string{"9464", "127.0.0.1:http", "127.0.0.1:70000"}},
		{variable: "REPLICATOR_RESOLVE", get: func(c Config) any { return c.Resolve },
			def: "", blank: "", good: "h0.test=127.0.0.1,h1.test=127.0.0.1", goodWant: "h0.test=127.0.0.1,h1.test=127.0.0.1",
			bad: []string{"h0.test", "h0.test=not-an-ip"}},
		{variable: "REPLICATOR_ROBOTS", get: func(c Config) any { return c.ObeyRobots },
			def: false, blank: false, good: "OBEY", goodWant: true,
			bad: []string{"yes", "respect"}},
		{variable: "REPLICATOR_MAX_CRAWL_DELAY_SECONDS", get: func(c Config) any { return c.MaxCrawlDelay },
			def: 60 * time.Second, blank: refused, good: "0", goodWant: time.Duration(0),
			bad: []string{"-1", "3601", "NaN", "soon"}},
		{variable: "REPLICATOR_FLEET_PACING", get: func(c Config) any { return c.FleetPacing },
			def: "auto", blank: "auto", good: "ON", goodWant: "on",
			bad: []string{"yes", "fleet"}},
	}

	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.variable] = true
		t.Run(tt.variable, func(t *testing.T) {
			t.Run("default", func(t *testing.T) {
				c, err := loadConfig(env(nil))
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				if diff := cmp.Diff(tt.def, tt.get(c), cmpPrefixes); diff != "" {
					t.Errorf("default (-want +got):\n%s", diff)
				}
			})
			// Blank ("VAR=" in an env file) means what it means to the
			// reference: see blankMeaning.
			for _, blank := range []string{"", "  "} {
				t.Run(fmt.Sprintf("blank=%q", blank), func(t *testing.T) {
					c, err := loadConfig(env(map[string]string{tt.variable: blank}))
					if tt.blank == refused {
						if !errors.Is(err, errSetting) {
							t.Fatalf("loadConfig(%s=%q) = %v, want an error wrapping errSetting", tt.variable, blank, err)
						}
						if msg := err.Error(); !strings.Contains(msg, tt.variable+`=""`) || !strings.Contains(msg, "empty") {
							t.Errorf("error %q does not name the variable and say it is empty", msg)
						}
						return
					}
					if err != nil {
						t.Fatalf("loadConfig(%s=%q): %v", tt.variable, blank, err)
					}
					if diff := cmp.Diff(tt.blank, tt.get(c), cmpPrefixes); diff != "" {
						t.Errorf("(-want +got):\n%s", diff)
					}
				})
			}
			t.Run("good", func(t *testing.T) {
				vars := map[string]string{tt.variable: tt.good}
				switch tt.variable {
				case "REPLICATOR_BLOB_BACKEND":
					vars["REPLICATOR_BLOB_BUCKET"] = "b"
				case "REPLICATOR_PERSIST_ENABLED":
					vars["REPLICATOR_PERMANENT_BUCKET"] = "p"
				}
				c, err := loadConfig(env(vars))
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				if diff := cmp.Diff(tt.goodWant, tt.get(c), cmpPrefixes); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
			for _, bad := range tt.bad {
				t.Run("bad="+bad, func(t *testing.T) {
					_, err := loadConfig(env(map[string]string{tt.variable: bad}))
					if !errors.Is(err, errSetting) {
						t.Fatalf("loadConfig(%s=%q) = %v, want an error wrapping errSetting", tt.variable, bad, err)
					}
					if msg := err.Error(); !strings.Contains(msg, tt.variable) || !strings.Contains(msg, bad) {
						t.Errorf("error %q does not name the variable and the value %q", msg, bad)
					}
				})
			}
		})
	}
	for _, s := range settings {
		if s.by == byWorker && !covered[s.name] {
			t.Errorf("setting %s has no row in this table", s.name)
		}
	}
}

// TestLoadConfigFinestSeconds: a positive seconds value is kept as given
// down to a microsecond, never rounded to 0 (which the components read as
// "the default", or for the host interval as "no pacing").
func TestLoadConfigFinestSeconds(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		get  func(Config) time.Duration
		want time.Duration
	}{
		{name: "blob TTL of a microsecond", vars: map[string]string{"REPLICATOR_BLOB_TTL_SECONDS": "0.000001"},
			get: func(c Config) time.Duration { return c.BlobTTL }, want: time.Microsecond},
		{name: "host interval of a microsecond", vars: map[string]string{"REPLICATOR_MIN_HOST_INTERVAL_SECONDS": "1e-6"},
			get: func(c Config) time.Duration { return c.MinHostInterval }, want: time.Microsecond},
		{name: "host interval of zero still disables pacing", vars: map[string]string{"REPLICATOR_MIN_HOST_INTERVAL_SECONDS": "0"},
			get: func(c Config) time.Duration { return c.MinHostInterval }, want: 0},
		{name: "sweep interval in fractions", vars: map[string]string{"REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS": "0.0015"},
			get: func(c Config) time.Duration { return c.BlobSweepInterval }, want: 1500 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(env(tt.vars))
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			if got := tt.get(c); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadConfigPairings(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr string // substring; "" means no error
	}{
		{name: "gcs without a bucket", vars: map[string]string{"REPLICATOR_BLOB_BACKEND": "gcs"},
			wantErr: "REPLICATOR_BLOB_BACKEND=gcs needs REPLICATOR_BLOB_BUCKET"},
		{name: "gcs with a bucket", vars: map[string]string{"REPLICATOR_BLOB_BACKEND": "gcs", "REPLICATOR_BLOB_BUCKET": "b"}},
		{name: "whole-fetch bound below the timeout ceiling: raised to it, as the reference's never is less",
			vars: map[string]string{"REPLICATOR_MAX_FETCH_SECONDS": "30", "REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "60"}},
		{name: "the two groups equal",
			vars:    map[string]string{"REPLICATOR_CONSUMER_GROUP": "g", "REPLICATOR_REPLICATE_CONSUMER_GROUP": "g"},
			wantErr: "must name different groups"},
		{name: "whole-fetch bound equal to the timeout ceiling",
			vars: map[string]string{"REPLICATOR_MAX_FETCH_SECONDS": "60", "REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "60"}},
		{name: "whole-fetch bound unset follows a raised timeout ceiling",
			vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "300"}},
		{name: "backoff cap below its base, as the reference takes it",
			vars: map[string]string{"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS": "5", "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS": "2"}},
		{name: "every bad value is reported, not just the first",
			vars:    map[string]string{"REPLICATOR_READ_BLOCK_MS": "abc", "REPLICATOR_CONCURRENCY": "0"},
			wantErr: "REPLICATOR_CONCURRENCY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(env(tt.vars))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("loadConfig: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("loadConfig = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadConfigRedactsRedisPassword(t *testing.T) {
	_, err := loadConfig(env(map[string]string{"REPLICATOR_REDIS_URL": "http://user:hunter2@example.com/"}))
	if err == nil {
		t.Fatal("loadConfig accepted an http URL as the Redis URL")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q carries the URL's password", err)
	}
	if !strings.Contains(err.Error(), "REPLICATOR_REDIS_URL") {
		t.Errorf("error %q does not name the variable", err)
	}
}

// env returns a lookup over vars only, so the machine's environment never
// leaks into a test.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// refused is a row's blank value when a blank must be a start-up error.
var refused = struct{ refused bool }{true}

var cmpPrefixes = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
