package main

import (
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLoadConfigTakesTheReferenceForms: values the reference's pydantic
// settings accept, in the spellings it accepts them, mean the same here.
func TestLoadConfigTakesTheReferenceForms(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string
		get      func(Config) any
		want     any
		wantWarn string // a substring of one warning; "" means none
	}{
		{name: "int with sign, underscores and a zero fraction", vars: map[string]string{"REPLICATOR_READ_BLOCK_MS": "+5_000.00"},
			get: func(c Config) any { return c.ReadBlock }, want: 5 * time.Second},
		{name: "int with leading zeros", vars: map[string]string{"REPLICATOR_CLAIM_MIN_IDLE_MS": "0060000"},
			get: func(c Config) any { return c.ClaimMinIdle }, want: time.Minute},
		{name: "byte count with underscores", vars: map[string]string{"REPLICATOR_MAX_BLOB_BYTES": "1_048_576"},
			get: func(c Config) any { return c.MaxBlobBytes }, want: int64(1 << 20)},
		{name: "float with an exponent", vars: map[string]string{"REPLICATOR_BLOB_TTL_SECONDS": "1e3"},
			get: func(c Config) any { return c.BlobTTL }, want: 1000 * time.Second},
		{name: "float with a sign", vars: map[string]string{"REPLICATOR_BLOB_TIMEOUT_SECONDS": "+5"},
			get: func(c Config) any { return c.BlobTimeout }, want: 5 * time.Second},
		{name: "float without an integer part", vars: map[string]string{"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS": ".5"},
			get: func(c Config) any { return c.ErrorBackoffBase }, want: 500 * time.Millisecond},
		{name: "float ending in a point", vars: map[string]string{"REPLICATOR_MIN_HOST_INTERVAL_SECONDS": "2."},
			get: func(c Config) any { return c.MinHostInterval }, want: 2 * time.Second},
		{name: "float with underscores", vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "1_0.5"},
			get: func(c Config) any { return c.MaxFetchTimeout }, want: 10500 * time.Millisecond},
		{name: "delivery attempts of 0 dead-letter at the first", vars: map[string]string{"REPLICATOR_MAX_DELIVERY_ATTEMPTS": "0"},
			get: func(c Config) any { return c.MaxDeliveryAttempts }, want: 1},
		{name: "negative delivery attempts dead-letter at the first", vars: map[string]string{"REPLICATOR_MAX_DELIVERY_ATTEMPTS": "-3"},
			get: func(c Config) any { return c.MaxDeliveryAttempts }, want: 1},
		{name: "delivery attempts past an int32 never reached", vars: map[string]string{"REPLICATOR_MAX_DELIVERY_ATTEMPTS": "99999999999"},
			get: func(c Config) any { return c.MaxDeliveryAttempts }, want: math.MaxInt32},
		{name: "cycle failures of 0 exit at the first", vars: map[string]string{"REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES": "0"},
			get: func(c Config) any { return c.MaxConsecutiveCycleFailures }, want: 1},
		{name: "log level in any case, padded", vars: map[string]string{"REPLICATOR_LOG_LEVEL": " debug "},
			get: func(c Config) any { return c.LogLevel }, want: slog.LevelDebug},
		{name: "log level WARN", vars: map[string]string{"REPLICATOR_LOG_LEVEL": "warn"},
			get: func(c Config) any { return c.LogLevel }, want: slog.LevelWarn},
		{name: "log level NOTSET lets everything through", vars: map[string]string{"REPLICATOR_LOG_LEVEL": "NOTSET"},
			get: func(c Config) any { return c.LogLevel }, want: slog.LevelDebug},
		{name: "unknown log level is INFO, with a warning", vars: map[string]string{"REPLICATOR_LOG_LEVEL": "verbose"},
			get: func(c Config) any { return c.LogLevel }, want: slog.LevelInfo, wantWarn: `REPLICATOR_LOG_LEVEL="verbose" is not a level name`},
		{name: "a number is no log level name", vars: map[string]string{"REPLICATOR_LOG_LEVEL": "10"},
			get: func(c Config) any { return c.LogLevel }, want: slog.LevelInfo, wantWarn: "REPLICATOR_LOG_LEVEL"},
		{name: "whole-fetch bound unset follows a timeout ceiling above 120", vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "300"},
			get: func(c Config) any { return c.MaxFetchTime }, want: 5 * time.Minute},
		{name: "whole-fetch bound unset stays 120 under a lower ceiling", vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "60"},
			get: func(c Config) any { return c.MaxFetchTime }, want: 2 * time.Minute},
		{name: "whole-fetch bound set above the ceiling", vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "300", "REPLICATOR_MAX_FETCH_SECONDS": "400"},
			get: func(c Config) any { return c.MaxFetchTime }, want: 400 * time.Second},
		{name: "whole-fetch bound below the ceiling is the ceiling, with a warning",
			vars: map[string]string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS": "300", "REPLICATOR_MAX_FETCH_SECONDS": "60"},
			get:  func(c Config) any { return c.MaxFetchTime }, want: 300 * time.Second, wantWarn: "bounding fetches at 300"},
		{name: "a blank consumer name is unset",
			vars: map[string]string{"REPLICATOR_CONSUMER_NAME": "", "REPLICATOR_CONSUMER_GROUP": "grp.a"},
			get:  func(c Config) any { return c.ConsumerName }, want: "grp-a-1"},
		{name: "each group's own override",
			vars: map[string]string{"REPLICATOR_CONSUMER_NAME": "f-2", "REPLICATOR_REPLICATE_CONSUMER_NAME": "r-2"},
			get:  func(c Config) any { return c.ConsumerName + " " + c.ReplicateConsumerName }, want: "f-2 r-2"},
		{name: "a deny list leaving out the Python worker's defaults, with a warning",
			vars: map[string]string{"REPLICATOR_BLOCKED_DESTINATIONS": "127.0.0.0/8,::1"},
			get:  func(c Config) any { return len(c.BlockedDestinations) }, want: 2, wantWarn: "leaves out 0.0.0.0/8, 10.0.0.0/8"},
		{name: "a deny list covering the Python worker's defaults, silently",
			vars: map[string]string{"REPLICATOR_BLOCKED_DESTINATIONS": "0.0.0.0/1, 128.0.0.0/1, ::/0"},
			get:  func(c Config) any { return len(c.BlockedDestinations) }, want: 3},
		{name: "backoff cap below its base: the base, with a warning",
			vars: map[string]string{"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS": "5", "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS": "2"},
			get:  func(c Config) any { return c.ErrorBackoffMax }, want: 2 * time.Second, wantWarn: "backing off by the base"},
		{name: "gcs: the local backend's settings are only parsed",
			vars: map[string]string{"REPLICATOR_BLOB_BACKEND": "gcs", "REPLICATOR_BLOB_BUCKET": "b",
				"REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS": "0", "REPLICATOR_BLOB_TEMP_GRACE_SECONDS": "-1", "REPLICATOR_BLOB_MAX_TOTAL_BYTES": "0"},
			get: func(c Config) any { return c.BlobBackend }, want: "gcs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(env(tt.vars))
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			if diff := cmp.Diff(tt.want, tt.get(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			warned := strings.Join(c.Warnings, "\n")
			if tt.wantWarn == "" && warned != "" {
				t.Errorf("unexpected warnings: %s", warned)
			}
			if !strings.Contains(warned, tt.wantWarn) {
				t.Errorf("warnings %q do not say %q", warned, tt.wantWarn)
			}
		})
	}
}

// TestLoadConfigRefusesWhatIsUnsafeHere: values the reference boots with
// but that are unsafe here stay start-up errors naming the variable; each
// row says why (docs/differences.md lists them).
func TestLoadConfigRefusesWhatIsUnsafeHere(t *testing.T) {
	tests := []struct {
		variable, value string
		why             string
		extra           map[string]string
	}{
		{"REPLICATOR_BLOB_TIMEOUT_SECONDS", "inf", "a storage operation without a bound holds its command and the shutdown for ever", nil},
		{"REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS", "0", "a sweep that never rests walks the tree without pause", nil},
		{"REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS", "inf", "a sweep that never comes again reaps nothing past its TTL", nil},
		{"REPLICATOR_BLOB_TEMP_GRACE_SECONDS", "0", "a grace of nothing reaps the temp files of stores in progress", nil},
		{"REPLICATOR_BLOB_TEMP_GRACE_SECONDS", "-1", "as 0", nil},
		{"REPLICATOR_BLOB_MAX_TOTAL_BYTES", "0", "the tree is always over it: every fetch parks for ever", nil},
		{"REPLICATOR_READ_BLOCK_MS", "0", "BLOCK 0 is wait for ever, and every pacing wait would park", nil},
		{"REPLICATOR_CLAIM_MIN_IDLE_MS", "0", "entries in flight would be reclaimed at once and fetched twice", nil},
		{"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS", "0", "no back-off hammers a failing broker", nil},
		{"REPLICATOR_ERROR_BACKOFF_MAX_SECONDS", "inf", "the first failure would park the loop for ever", nil},
		{"REPLICATOR_DEDUPE_TTL_SECONDS", "0", "Redis refuses SET EX 0, so no success could be recorded", nil},
		{"REPLICATOR_MAX_BLOB_BYTES", "0", "every command would be closed too_large", nil},
		{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", "0", "every command naming a timeout would be closed invalid_request_options", nil},
		{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", "nan", "no ceiling at all", nil},
		{"REPLICATOR_CONSUMER_GROUP", "replicator.replicate", "the two groups equal: which group's consumer name applies cannot be told", nil},
		{"REPLICATOR_BLOCKED_DESTINATIONS", ",", "names no range: no value means fetch anything", nil},
		{"REPLICATOR_PERSIST_ENABLED", "true", "persisting with no REPLICATOR_PERMANENT_BUCKET has nowhere to keep the bytes", nil},
	}
	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			vars := map[string]string{tt.variable: tt.value}
			for k, v := range tt.extra {
				vars[k] = v
			}
			_, err := loadConfig(env(vars))
			if !errors.Is(err, errSetting) || !strings.Contains(err.Error(), tt.variable) {
				t.Fatalf("loadConfig(%s=%q) = %v, want a start-up error naming it (%s)", tt.variable, tt.value, err, tt.why)
			}
		})
	}
}

// TestLoadConfigFromEnviron: names are read in any case, as
// pydantic-settings reads them; two spellings that disagree are an error;
// unknown REPLICATOR_* variables are ignored with a warning.
func TestLoadConfigFromEnviron(t *testing.T) {
	c, err := loadConfigFrom([]string{"PATH=/bin", "replicator_log_level=DEBUG", "Replicator_Read_Block_Ms=250",
		"REPLICATOR_SHINY_NEW_SETTING=/etc/aliases.json"})
	if err != nil {
		t.Fatalf("loadConfigFrom: %v", err)
	}
	if c.LogLevel != slog.LevelDebug || c.ReadBlock != 250*time.Millisecond {
		t.Errorf("LogLevel = %v, ReadBlock = %v; want DEBUG and 250ms from the lower- and mixed-case names", c.LogLevel, c.ReadBlock)
	}
	if w := strings.Join(c.Warnings, "\n"); !strings.Contains(w, "REPLICATOR_SHINY_NEW_SETTING is not a setting of this worker") {
		t.Errorf("warnings %q do not name the unknown variable", w)
	}
	if _, err := loadConfigFrom([]string{"REPLICATOR_LOG_LEVEL=DEBUG", "replicator_log_level=ERROR"}); !errors.Is(err, errSetting) ||
		!strings.Contains(err.Error(), "REPLICATOR_LOG_LEVEL and replicator_log_level") {
		t.Errorf("two spellings with different values: err = %v, want a start-up error naming both", err)
	}
	if _, err := loadConfigFrom([]string{"REPLICATOR_LOG_LEVEL=DEBUG", "replicator_log_level=DEBUG"}); err != nil {
		t.Errorf("two spellings with one value: %v", err)
	}
}

// FuzzPyNumbers checks the pydantic number forms against each other: any
// int pyInt takes, pyFloat takes as the same value (pydantic's float
// accepts every int form), and neither takes white space inside.
func FuzzPyNumbers(f *testing.F) {
	for _, seed := range []string{
		"5000",      // plain
		"+5_000.00", // sign, underscores, zero fraction
		"007",       // leading zeros
		"1e3",       // a float only
		"1__0",      // doubled underscore: neither
		"_1",        // leading underscore: neither
		"5.",        // a float only
		"0x10",      // hex: neither
		"inf",       // a float only
		"-0",        // negative zero
		"1 000",     // inner space: neither
		"٣",         // another script's digit: neither
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, ierr := pyInt(v)
		x, ferr := pyFloat(v)
		if strings.ContainsAny(v, " \t\n") && (ierr == nil || ferr == nil) {
			t.Fatalf("%q has inner white space but parsed: int %v %v, float %v %v", v, n, ierr, x, ferr)
		}
		if ierr == nil {
			if ferr != nil {
				t.Fatalf("pyInt(%q) = %d but pyFloat refuses it: %v", v, n, ferr)
			}
			if math.Abs(x-float64(n)) > math.Abs(float64(n))*1e-15 {
				t.Fatalf("pyInt(%q) = %d, pyFloat = %v", v, n, x)
			}
		}
	})
}
