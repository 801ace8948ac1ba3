package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/loop"
)

// errSetting marks a REPLICATOR_* value the worker cannot start with. main
// maps it to exit status 2.
var errSetting = errors.New("replicator: invalid setting")

// Blob backends.
const (
	backendLocal = "local"
	backendGCS   = "gcs"
)

// defaultMaxFetchTime is REPLICATOR_MAX_FETCH_SECONDS's floor when unset.
const defaultMaxFetchTime = 120 * time.Second

// maxSettingSeconds bounds every seconds-valued setting: ten years, the
// reference's ceiling on the blob TTL, and far inside what a time.Duration
// holds, so no setting can overflow the arithmetic done with it.
const maxSettingSeconds = 10 * 365 * 24 * 60 * 60

// Config is the worker's configuration, read from REPLICATOR_* environment
// variables by loadConfig. Durations are converted from the settings'
// seconds and milliseconds.
type Config struct {
	RedisURL string

	BlobBackend       string // backendLocal or backendGCS
	BlobDir           string
	BlobBucket        string
	BlobPrefix        string // without leading or trailing slashes; "" is the bucket root
	BlobTimeout       time.Duration
	BlobTTL           time.Duration
	BlobSweepInterval time.Duration
	BlobTempGrace     time.Duration
	BlobMaxTotalBytes int64

	ConsumerGroup   string
	ConsumerName    string
	ConsumerStartID string

	// content.replicate.
	ReplicateConsumerGroup string
	ReplicationAliasesFile string // "" means nothing is provisioned
	ReplicateWriteTimeout  time.Duration

	ReadBlock                   time.Duration
	ClaimMinIdle                time.Duration
	MaxDeliveryAttempts         int
	ErrorBackoffBase            time.Duration
	ErrorBackoffMax             time.Duration
	MaxConsecutiveCycleFailures int
	DedupeTTL                   time.Duration

	MaxBlobBytes    int64
	MaxFetchTimeout time.Duration // ceiling on a command's timeout_seconds
	MaxFetchTime    time.Duration // bound on a whole fetch, all hops included
	MinHostInterval time.Duration

	LogLevel slog.Level

	// The project's additions.
	Concurrency int
	MaxHeld     int // 0 means worker.DefaultHeldPerRequest × Concurrency
	AllowCIDRs  []netip.Prefix
	MetricsAddr string // "" means no metrics server
	Resolve     string // raw REPLICATOR_RESOLVE, already validated

	// robots.txt (docs/politeness.md, robots.txt).
	ObeyRobots    bool          // REPLICATOR_ROBOTS=obey
	MaxCrawlDelay time.Duration // 0: Crawl-delay ignored

	// Warnings are what the worker logs once its logger exists: values
	// taken as the reference takes them but worth an operator's look.
	Warnings []string
}

// setting is one REPLICATOR_* variable: its default (as the text an operator
// would write), what a blank value means, and how it is applied to a Config.
type setting struct {
	name  string
	def   string
	blank blankMeaning
	help  string
	set   func(c *Config, v string) error
	// ifUnset, when set, is what an unset variable means instead of set(def):
	// for a default that depends on other settings.
	ifUnset func(c *Config)
	// secret settings are shown redacted in errors (URL userinfo).
	secret bool
}

// blankMeaning is what a variable that is set but empty (or only spaces),
// as systemd's "VAR=" leaves it, means for one setting. The drop-in promise
// decides it: an env file written for the reference must not behave
// differently here. The reference's pydantic-settings passes the empty
// string to the field as it is, so:
//
//   - numbers (every …_SECONDS, …_MS, byte count and count): "" does not
//     parse, a validation error there, so a start-up error here too. The
//     project's own numbers (REPLICATOR_MAX_FETCH_SECONDS,
//     REPLICATOR_CONCURRENCY, REPLICATOR_MAX_HELD) follow the same rule.
//   - REPLICATOR_BLOB_BACKEND: not one of its literals there; an error.
//   - REPLICATOR_REDIS_URL and REPLICATOR_CONSUMER_START_ID: accepted as
//     strings there but the boot fails (no URL scheme; XGROUP CREATE refuses
//     the id); an error here, before anything is opened.
//   - REPLICATOR_CONSUMER_GROUP and REPLICATOR_CONSUMER_NAME: there the
//     empty string becomes the group's or consumer's name. This worker
//     cannot join under an empty name (the fetch package reads "" as its
//     default), and quietly using replicator.fetch or replicator@<host>
//     instead would split a fleet or orphan pending entries, so it is an
//     error that asks for a real name.
//   - REPLICATOR_BLOB_DIR: a Path there, and Path("") is ".", the working
//     directory; the same here.
//   - REPLICATOR_BLOB_PREFIX: the empty prefix there, blobs at the bucket
//     root; the same here.
//   - REPLICATOR_BLOB_BUCKET: the empty string, which is also its default.
//   - REPLICATOR_LOG_LEVEL: the reference maps an unknown or empty name to
//     INFO, the default; the same here (an unknown one with a warning).
//   - the project's REPLICATOR_ALLOW_CIDRS, REPLICATOR_METRICS_ADDR and
//     REPLICATOR_RESOLVE: empty is their documented "none" or "off".
//
// A value of spaces only counts as blank: values are trimmed, as before.
type blankMeaning int

const (
	// blankRefused, the zero value so that a new setting never falls back
	// silently: a blank value is a start-up error.
	blankRefused blankMeaning = iota
	// blankDefault: a blank value means what unset means.
	blankDefault
	// blankEmpty: the empty string is handed to set, which gives it the
	// reference's meaning.
	blankEmpty
)

// errBlank is what loadConfig reports for a blank value of a blankRefused
// setting.
var errBlank = errors.New("empty: give a value, or unset the variable for its default")

// settings lists every variable the worker reads, in the order of docs/settings.md's
// section 9. It is also what `replicator worker --help` prints.
var settings = []setting{
	{name: "REPLICATOR_REDIS_URL", def: "redis://localhost:6379/0", secret: true,
		help: "Redis URL, read as redis-py reads it (db, ssl_cert_reqs, ssl_ca_certs, ssl_certfile, ssl_keyfile, …); extra cluster seeds as ?addr=host:port",
		set: func(c *Config, v string) error {
			t, err := parseRedisURL(v)
			if err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "redis url: "))
			}
			for _, n := range t.notes {
				c.Warnings = append(c.Warnings, "REPLICATOR_REDIS_URL "+n)
			}
			c.RedisURL = v
			return nil
		}},
	{name: "REPLICATOR_BLOB_BACKEND", def: backendLocal,
		help: "where blobs are stored: local or gcs",
		set: func(c *Config, v string) error {
			if v != backendLocal && v != backendGCS {
				return errors.New("want local or gcs")
			}
			c.BlobBackend = v
			return nil
		}},
	{name: "REPLICATOR_BLOB_DIR", def: "blobs", blank: blankEmpty,
		help: "local backend: root of the blob tree (empty: the working directory)",
		set: func(c *Config, v string) error {
			if v == "" {
				v = "." // the reference's Path("")
			}
			c.BlobDir = v
			return nil
		}},
	{name: "REPLICATOR_BLOB_BUCKET", def: "", blank: blankDefault,
		help: "gcs backend: bucket (required with gcs)",
		set:  func(c *Config, v string) error { c.BlobBucket = v; return nil }},
	{name: "REPLICATOR_BLOB_PREFIX", def: "blobs", blank: blankEmpty,
		help: "gcs backend: object name prefix (slashes at either end are dropped; empty: the bucket root)",
		set:  func(c *Config, v string) error { c.BlobPrefix = strings.Trim(v, "/"); return nil }},
	{name: "REPLICATOR_BLOB_TIMEOUT_SECONDS", def: "30",
		help: "gcs backend: per-operation timeout",
		set:  seconds(func(c *Config) *time.Duration { return &c.BlobTimeout }, false)},
	{name: "REPLICATOR_BLOB_TTL_SECONDS", def: "604800",
		help: "how long a blob survives after its last reference (at most ten years)",
		set:  seconds(func(c *Config) *time.Duration { return &c.BlobTTL }, false)},
	{name: "REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS", def: "900",
		help: "local backend: how often the sweep runs",
		set:  localOnly(pyFloatOnly, seconds(func(c *Config) *time.Duration { return &c.BlobSweepInterval }, false))},
	{name: "REPLICATOR_BLOB_TEMP_GRACE_SECONDS", def: "3600",
		help: "local backend: age at which a temp file is debris",
		set:  localOnly(pyFloatOnly, seconds(func(c *Config) *time.Duration { return &c.BlobTempGrace }, false))},
	{name: "REPLICATOR_BLOB_MAX_TOTAL_BYTES", def: "2147483648",
		help: "local backend: bytes held at which fetching pauses",
		set:  localOnly(pyIntOnly, positiveInt64(func(c *Config) *int64 { return &c.BlobMaxTotalBytes }))},
	{name: "REPLICATOR_CONSUMER_GROUP", def: "replicator.fetch",
		help: "consumer group on content.fetch",
		set:  func(c *Config, v string) error { c.ConsumerGroup = v; return nil }},
	{name: "REPLICATOR_REPLICATE_CONSUMER_GROUP", def: "replicator.replicate",
		help: "consumer group on content.replicate",
		set:  func(c *Config, v string) error { c.ReplicateConsumerGroup = v; return nil }},
	{name: "REPLICATOR_REPLICATION_ALIASES_FILE", def: "", blank: blankDefault,
		help: "JSON file of the stores content.replicate may write (unset: none; see docs/replicate.md)",
		set:  func(c *Config, v string) error { c.ReplicationAliasesFile = v; return nil }},
	{name: "REPLICATOR_REPLICATE_WRITE_TIMEOUT_SECONDS", def: "120",
		help: "bound on one content.replicate write, whole seconds",
		set: func(c *Config, v string) error {
			if err := pyIntOnly(v); err != nil {
				return err
			}
			return seconds(func(c *Config) *time.Duration { return &c.ReplicateWriteTimeout }, false)(c, v)
		}},
	{name: "REPLICATOR_CONSUMER_NAME", def: "",
		help: "this worker's name in the group (default replicator@<hostname>)",
		set: func(c *Config, v string) error {
			if v == "" { // only when unset: a blank value is refused
				v = defaultConsumerName()
			}
			c.ConsumerName = v
			return nil
		}},
	{name: "REPLICATOR_CONSUMER_START_ID", def: "$",
		help: "where a newly created group starts: $, 0 or a stream id",
		set: func(c *Config, v string) error {
			if v != "$" && !streamID.MatchString(v) {
				return errors.New("want $, 0 or a stream id like 1700000000000-0")
			}
			c.ConsumerStartID = v
			return nil
		}},
	{name: "REPLICATOR_READ_BLOCK_MS", def: "5000",
		help: "how long a read blocks; also the longest pacing wait slept through",
		set:  millis(func(c *Config) *time.Duration { return &c.ReadBlock })},
	{name: "REPLICATOR_CLAIM_MIN_IDLE_MS", def: "60000",
		help: "idle time before a pending entry is reclaimed (the retry cadence)",
		set:  millis(func(c *Config) *time.Duration { return &c.ClaimMinIdle })},
	{name: "REPLICATOR_MAX_DELIVERY_ATTEMPTS", def: "5",
		help: "deliveries of an unclassified failure before it is dead-lettered (0 or less: 1)",
		set:  atLeastOne(func(c *Config) *int { return &c.MaxDeliveryAttempts })},
	{name: "REPLICATOR_ERROR_BACKOFF_BASE_SECONDS", def: "1",
		help: "first backoff after a failed cycle",
		set:  seconds(func(c *Config) *time.Duration { return &c.ErrorBackoffBase }, false)},
	{name: "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS", def: "30",
		help: "longest backoff after failed cycles (below the base: the base)",
		set:  seconds(func(c *Config) *time.Duration { return &c.ErrorBackoffMax }, false)},
	{name: "REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES", def: "20",
		help: "failed cycles in a row before the worker exits non-zero (0 or less: 1)",
		set:  atLeastOne(func(c *Config) *int { return &c.MaxConsecutiveCycleFailures })},
	{name: "REPLICATOR_DEDUPE_TTL_SECONDS", def: "86400",
		help: "lifetime of a command's dedupe key",
		set: func(c *Config, v string) error {
			var n int64
			if err := positiveInt64(func(*Config) *int64 { return &n })(c, v); err != nil {
				return err
			}
			if n > maxSettingSeconds {
				return fmt.Errorf("over %d", maxSettingSeconds)
			}
			c.DedupeTTL = time.Duration(n) * time.Second
			return nil
		}},
	{name: "REPLICATOR_MAX_BLOB_BYTES", def: "67108864",
		help: "largest body stored",
		set:  positiveInt64(func(c *Config) *int64 { return &c.MaxBlobBytes })},
	{name: "REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", def: "120",
		help: "largest timeout_seconds a command may ask for",
		set:  seconds(func(c *Config) *time.Duration { return &c.MaxFetchTimeout }, false)},
	{name: "REPLICATOR_MAX_FETCH_SECONDS", def: "120",
		help: "bound on a whole fetch, all hops included (unset: the larger of 120 and REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS; set, not below it)",
		set:  seconds(func(c *Config) *time.Duration { return &c.MaxFetchTime }, false),
		// Zero until the pairings: then the larger of 120 s and the ceiling.
		ifUnset: func(c *Config) { c.MaxFetchTime = 0 }},
	{name: "REPLICATOR_MIN_HOST_INTERVAL_SECONDS", def: "1.0",
		help: "spacing for hosts without a published policy (0 to 3600)",
		set: func(c *Config, v string) error {
			if err := seconds(func(c *Config) *time.Duration { return &c.MinHostInterval }, true)(c, v); err != nil {
				return err
			}
			if c.MinHostInterval > time.Hour {
				return errors.New("over 3600")
			}
			return nil
		}},
	{name: "REPLICATOR_LOG_LEVEL", def: "INFO", blank: blankDefault,
		help: "DEBUG, INFO, WARNING, ERROR or CRITICAL (also WARN, FATAL, NOTSET; anything else: INFO)",
		set: func(c *Config, v string) error {
			l, ok := logLevels[strings.ToUpper(v)]
			if !ok {
				// As the reference's logging set-up has it: an unknown name
				// neither stops the worker nor silences it.
				l = slog.LevelInfo
				c.Warnings = append(c.Warnings, fmt.Sprintf("REPLICATOR_LOG_LEVEL=%q is not a level name; logging at INFO", v))
			}
			c.LogLevel = l
			return nil
		}},
	{name: "REPLICATOR_CONCURRENCY", def: "16",
		help: "commands handled at once",
		set:  positiveInt(func(c *Config) *int { return &c.Concurrency })},
	{name: "REPLICATOR_MAX_HELD", def: "",
		help: "commands held in memory at once (waiting, parked or in flight)",
		set: func(c *Config, v string) error {
			if v == "" { // only when unset: a blank value is refused
				c.MaxHeld = 0
				return nil
			}
			return positiveInt(func(c *Config) *int { return &c.MaxHeld })(c, v)
		}},
	{name: "REPLICATOR_ALLOW_CIDRS", def: "", blank: blankDefault,
		help: "CIDRs the destination guard lets through (private origins, tests)",
		set: func(c *Config, v string) error {
			p, err := parseCIDRs(v)
			if err != nil {
				return err
			}
			c.AllowCIDRs = p
			return nil
		}},
	{name: "REPLICATOR_METRICS_ADDR", def: "", blank: blankDefault,
		help: "host:port serving /metrics and /healthz (empty: off)",
		set: func(c *Config, v string) error {
			if v == "" {
				c.MetricsAddr = ""
				return nil
			}
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return errors.New("want host:port")
			}
			if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
				return errors.New("want a port number")
			}
			c.MetricsAddr = v
			return nil
		}},
	{name: "REPLICATOR_RESOLVE", def: "", blank: blankDefault,
		help: "test/dev only: host=ip pairs answering DNS (the guard still judges them)",
		set: func(c *Config, v string) error {
			if _, err := parseResolve(v); err != nil {
				return err
			}
			c.Resolve = v
			return nil
		}},
	{name: "REPLICATOR_ROBOTS", def: "ignore", blank: blankDefault,
		help: "ignore (no robots.txt request is ever made) or obey (RFC 9309: a URL robots.txt disallows ends fetch_failed robots_disallowed)",
		set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "ignore":
				c.ObeyRobots = false
			case "obey":
				c.ObeyRobots = true
			default:
				return errors.New("want ignore or obey")
			}
			return nil
		}},
	{name: "REPLICATOR_MAX_CRAWL_DELAY_SECONDS", def: "60",
		help: "cap on a robots.txt Crawl-delay taken as its host's floor under REPLICATOR_ROBOTS=obey (0 to 3600; 0 ignores Crawl-delay)",
		set: func(c *Config, v string) error {
			if err := seconds(func(c *Config) *time.Duration { return &c.MaxCrawlDelay }, true)(c, v); err != nil {
				return err
			}
			if c.MaxCrawlDelay > time.Hour {
				return errors.New("over 3600")
			}
			return nil
		}},
}

// streamID matches a Redis stream id: milliseconds, optionally -sequence.
var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// logLevels maps the reference's level names (Python logging's) to slog.
// NOTSET lets everything through there, as DEBUG does here.
var logLevels = map[string]slog.Level{
	"NOTSET":   slog.LevelDebug,
	"DEBUG":    slog.LevelDebug,
	"INFO":     slog.LevelInfo,
	"WARN":     slog.LevelWarn,
	"WARNING":  slog.LevelWarn,
	"ERROR":    slog.LevelError,
	"CRITICAL": slog.LevelError + 4,
	"FATAL":    slog.LevelError + 4,
}

// defaultConsumerName is replicator@<hostname>, as the reference names its
// consumers, so two hosts never share a pending-entries list. A variable so
// tests can pin it.
var defaultConsumerName = loop.DefaultConsumer

// loadConfig reads every REPLICATOR_* setting through lookup (os.LookupEnv
// in production). An unset variable takes its default; a blank one means
// what blankMeaning says for its setting; any other value must be valid.
// Every invalid one is reported (joined), each naming the variable and the
// value (a Redis URL's password redacted). The errors wrap errSetting.
func loadConfig(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	for _, s := range settings {
		raw, isSet := lookup(s.name)
		v := strings.TrimSpace(raw)
		var err error
		switch {
		case !isSet && s.ifUnset != nil:
			s.ifUnset(&c)
		case !isSet, v == "" && s.blank == blankDefault:
			err = s.set(&c, s.def)
		case v == "" && s.blank == blankRefused:
			err = errBlank
		default:
			err = s.set(&c, v)
		}
		if err != nil {
			shown := v
			if s.secret {
				shown = envelope.RedactURL(v)
			}
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", errSetting, s.name, shown, err))
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	// Pairings, checked once every value parses.
	if c.BlobBackend == backendGCS && c.BlobBucket == "" {
		errs = append(errs, fmt.Errorf("%w: REPLICATOR_BLOB_BACKEND=gcs needs REPLICATOR_BLOB_BUCKET", errSetting))
	}
	if c.MaxFetchTime == 0 { // unset: it follows the timeout ceiling
		c.MaxFetchTime = max(defaultMaxFetchTime, c.MaxFetchTimeout)
	}
	if c.MaxFetchTime < c.MaxFetchTimeout {
		errs = append(errs, fmt.Errorf("%w: REPLICATOR_MAX_FETCH_SECONDS=%q is below REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=%q",
			errSetting, seconds2text(c.MaxFetchTime), seconds2text(c.MaxFetchTimeout)))
	}
	if c.ErrorBackoffMax < c.ErrorBackoffBase {
		// The reference backs off by the base first, then by the max; the
		// worker keeps the base throughout, the slower of the two.
		c.Warnings = append(c.Warnings, fmt.Sprintf("REPLICATOR_ERROR_BACKOFF_MAX_SECONDS=%s is below REPLICATOR_ERROR_BACKOFF_BASE_SECONDS=%s; backing off by the base",
			seconds2text(c.ErrorBackoffMax), seconds2text(c.ErrorBackoffBase)))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// loadConfigFrom is loadConfig over an environment as os.Environ lists it,
// read as the reference's pydantic-settings reads one: a variable's name in
// any case (REPLICATOR_LOG_LEVEL, replicator_log_level). Two spellings of
// one name with different values are a start-up error rather than a guess
// at which the reference would take. REPLICATOR_* variables the worker does
// not read are ignored, as there, with a warning.
func loadConfigFrom(environ []string) (Config, error) {
	byName := map[string][]string{} // upper-cased name → "NAME=value" entries
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		byName[strings.ToUpper(name)] = append(byName[strings.ToUpper(name)], kv)
	}
	known := map[string]bool{}
	var errs []error
	for _, s := range settings {
		known[s.name] = true
		entries := byName[s.name]
		for _, kv := range entries[min(1, len(entries)):] {
			if _, v, _ := strings.Cut(kv, "="); v != valueOf(entries[0]) {
				a, _, _ := strings.Cut(entries[0], "=")
				b, _, _ := strings.Cut(kv, "=")
				errs = append(errs, fmt.Errorf("%w: %s and %s are both set, to different values: keep one", errSetting, a, b))
				break
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	c, err := loadConfig(func(name string) (string, bool) {
		if entries := byName[name]; len(entries) > 0 {
			return valueOf(entries[0]), true
		}
		return "", false
	})
	if err != nil {
		return c, err
	}
	var unknown []string
	for name, entries := range byName {
		if strings.HasPrefix(name, "REPLICATOR_") && !known[name] {
			n, _, _ := strings.Cut(entries[0], "=")
			unknown = append(unknown, n)
		}
	}
	slices.Sort(unknown)
	for _, n := range unknown {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is not a setting of this worker; ignored", n))
	}
	return c, nil
}

func valueOf(kv string) string {
	_, v, _ := strings.Cut(kv, "=")
	return v
}

// seconds2text prints a duration the way the settings spell it.
func seconds2text(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// minSettingStep is the smallest positive seconds value accepted. Anything
// finer would not survive the worker's arithmetic: under a nanosecond the
// time.Duration is 0, which the components read as "use the default", and
// under a microsecond the fleet pacer's script (which counts microseconds)
// sees 0, which means no spacing at all.
const minSettingStep = time.Microsecond

// seconds parses a number of seconds as pydantic reads a float (pyFloat):
// finite, > 0 (or ≥ 0 when zeroOK), at most maxSettingSeconds, and, when
// positive, at least minSettingStep.
func seconds(field func(*Config) *time.Duration, zeroOK bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		f, err := pyFloat(v)
		switch {
		case err != nil:
			return errors.New("not a number of seconds")
		case math.IsNaN(f) || math.IsInf(f, 0):
			return errors.New("not finite: a bound that never ends, or compares false with every time")
		case f < 0 || (f == 0 && !zeroOK):
			if zeroOK {
				return errors.New("negative")
			}
			return errors.New("must be positive")
		case f > maxSettingSeconds:
			return fmt.Errorf("over %d", maxSettingSeconds)
		}
		d := time.Duration(f * float64(time.Second))
		if f > 0 && d < minSettingStep {
			return fmt.Errorf("positive but under %s seconds, the finest step the worker keeps", seconds2text(minSettingStep))
		}
		*field(c) = d
		return nil
	}
}

// millis parses a positive whole number of milliseconds (pyInt).
func millis(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := pyInt(v)
		switch {
		case errors.Is(err, errIntRange):
			return fmt.Errorf("over %d", maxSettingSeconds*1000)
		case err != nil:
			return errors.New("not a whole number of milliseconds")
		case n <= 0:
			return errors.New("must be positive")
		case n > maxSettingSeconds*1000:
			return fmt.Errorf("over %d", maxSettingSeconds*1000)
		}
		*field(c) = time.Duration(n) * time.Millisecond
		return nil
	}
}

// positiveInt64 parses a whole number > 0 (pyInt).
func positiveInt64(field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := pyInt(v)
		switch {
		case errors.Is(err, errIntRange):
			return fmt.Errorf("over %d", int64(math.MaxInt64))
		case err != nil:
			return errors.New("not a whole number")
		case n <= 0:
			return errors.New("must be positive")
		}
		*field(c) = n
		return nil
	}
}

// positiveInt parses a whole number > 0 (pyInt) that fits an int32, so
// counts stay sane on every platform.
func positiveInt(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := pyInt(v)
		switch {
		case err != nil && !errors.Is(err, errIntRange):
			return errors.New("not a whole number (up to 2147483647)")
		case err != nil || n > math.MaxInt32:
			return errors.New("over 2147483647")
		case n <= 0:
			return errors.New("must be positive")
		}
		*field(c) = int(n)
		return nil
	}
}

// atLeastOne parses a count the reference compares with >=, where every
// value up to 1 means "at the first": 0 or less is 1 here, and a count past
// an int32, which no delivery or failure count reaches, is the largest one.
func atLeastOne(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := pyInt(v)
		switch {
		case errors.Is(err, errIntRange):
			if strings.HasPrefix(v, "-") {
				n = 1
			} else {
				n = math.MaxInt32
			}
		case err != nil:
			return errors.New("not a whole number")
		}
		*field(c) = int(min(max(n, 1), math.MaxInt32))
		return nil
	}
}

// pyFloatOnly and pyIntOnly accept what pydantic parses as a float or an
// int, whatever its value.
func pyFloatOnly(v string) error {
	if _, err := pyFloat(v); err != nil {
		return errors.New("not a number")
	}
	return nil
}

func pyIntOnly(v string) error {
	if _, err := pyInt(v); err != nil && !errors.Is(err, errIntRange) {
		return errors.New("not a whole number")
	}
	return nil
}

// localOnly is a setting only the local backend uses. With gcs the
// reference never reads its value beyond parsing it, so neither does the
// worker: any number parse accepts is taken, and nothing reads it.
func localOnly(parse func(string) error, set func(*Config, string) error) func(*Config, string) error {
	return func(c *Config, v string) error {
		if c.BlobBackend == backendGCS {
			return parse(v)
		}
		return set(c, v)
	}
}
