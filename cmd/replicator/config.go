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

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink/gcs"
	"github.com/replicator-go/replicator/sink/local"
)

// errSetting marks a REPLICATOR_* value the worker cannot start with. main
// maps it to exit status 2.
var errSetting = errors.New("replicator: invalid setting")

// Blob backends.
const (
	backendLocal = "local"
	backendGCS   = "gcs"
)

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
	ConsumerName    string // resolved: the override, or derived from the group
	ConsumerStartID string

	// content.replicate.
	ReplicateConsumerGroup string
	ReplicateConsumerName  string // resolved, as ConsumerName
	ReplicationAliasesFile string // "" means nothing is provisioned
	ReplicateWriteTimeout  time.Duration
	PermanentBucket        string // "" means no permanent store
	PersistEnabled         bool   // content.persist runs (it needs PermanentBucket)

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

	// BlockedDestinations is REPLICATOR_BLOCKED_DESTINATIONS: ranges refused
	// on top of the guard's own rules, even inside REPLICATOR_ALLOW_CIDRS;
	// nil when unset (the guard's rules already refuse the Python worker's
	// default set).
	BlockedDestinations []netip.Prefix

	LogLevel slog.Level

	// The project's additions.
	Concurrency int
	MaxHeld     int // 0 means contentfetch.DefaultMaxHeld(Concurrency)
	AllowCIDRs  []netip.Prefix
	MetricsAddr string // "" means no metrics server
	Resolve     string // raw REPLICATOR_RESOLVE, already validated

	// EgressProxyCIDRs, when not empty, turns the environment's proxies
	// on and bounds where they may be.
	EgressProxyCIDRs []netip.Prefix

	// robots.txt (docs/politeness.md, robots.txt).
	ObeyRobots    bool          // REPLICATOR_ROBOTS=obey
	MaxCrawlDelay time.Duration // 0: Crawl-delay ignored

	// FleetPacing is REPLICATOR_FLEET_PACING: fleetAuto, fleetOn or
	// fleetOff (docs/operations.md, Redis ACL).
	FleetPacing string
	// Read by `replicator check-redis` (checkredis.go).
	RedisFloorTimeout time.Duration
	RedisFloorWait    time.Duration

	// Read by `replicator notify-failure` (notify.go).
	NotifyURL        string
	NotifyToken      string
	NotifyTimeout    time.Duration
	NotifyMode       string
	NotifyTemplateID string
	NotifyChannelIDs []string

	// Warnings are what the worker logs once its logger exists: values
	// taken as the reference takes them but worth an operator's look.
	Warnings []string
}

// setting is one REPLICATOR_* variable. The table below is the one place a
// setting's name, default, accepted values and meaning are written:
// `replicator worker --help` prints it and docs/settings.md is generated from
// it (go generate; TestSettingsDoc fails while the file is stale).
//
// Text fields are Markdown as docs/settings.md shows it: `code` spans and
// links relative to docs/; --help prints them as plain text (settingtext.go).
type setting struct {
	name string
	// def is the default as an operator would write it: what an unset
	// variable means (unless ifUnset says otherwise), and what the docs show
	// unless shownDef is given. "" shows as "none".
	def string
	// shownDef is the default as the docs show it, for a default def cannot
	// spell (one that depends on the host or on other settings).
	shownDef string
	// forms says which values are accepted.
	forms string
	// meaning says what the setting governs.
	meaning string
	// blank is what a set but empty value means; blankText says it for
	// blankEmpty settings.
	blank     blankMeaning
	blankText string
	// own marks the project's own settings; the others are the Python
	// worker's, with its names, defaults and readings.
	own bool
	set func(c *Config, v string) error
	// ifUnset, when set, is what an unset variable means instead of set(def):
	// for a default that depends on other settings.
	ifUnset func(c *Config)
	// secret settings are shown redacted in errors (URL userinfo).
	secret bool
	// by is the command that reads the setting: the worker (the zero
	// value), another subcommand, or none at all (a Python worker's setting
	// this worker knows and does not read).
	by reader
}

// reader is the command that reads a setting.
type reader string

const (
	byWorker     reader = ""
	byCheckRedis reader = "check-redis"
	byNotify     reader = "notify-failure"
	// byNone marks the Python worker's settings this worker does not read:
	// known, so never warned about as unknown, and documented with why.
	byNone reader = "none"
)

// blankMeaning is what a variable that is set but empty (or only spaces),
// as systemd's "VAR=" leaves it, means for one setting. The drop-in promise
// decides it: an env file written for the reference must not behave
// differently here. The reference's pydantic-settings hands the empty
// string to the field as it is: a number, a Literal, a URL or a stream id
// refuses it or fails the boot there, so it is refused here; a Path is "."
// and a string is itself, which blankEmpty settings reproduce; the log
// level maps it to INFO, the default. An empty group or consumer name, which
// the reference would join under, is refused: this worker cannot join under
// "" (the fetch package reads it as its default), and quietly using the
// default would split a fleet or orphan pending entries. The project's own
// list and address settings read it as none, their default.
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

// Accepted forms shared by several settings. Number forms are pydantic's
// (docs/settings.md, Reading the environment).
const (
	formSeconds      = "seconds > 0"
	formWholeSeconds = "whole seconds > 0"
	formMillis       = "whole milliseconds > 0"
	formBytes        = "bytes > 0"
	formCount        = "a whole number from 1 to 2,147,483,647"
	formAtLeastOne   = "a whole number; 0 or less means 1"
	// The local backend's settings are only parsed with gcs, as there.
	formLocalOnly = " (with `gcs`: any number, unused)"
)

// settings lists every variable the worker reads, the Python worker's in
// its order and then the project's own. To add one, add an entry here and
// run `go generate ./...` to rewrite docs/settings.md.
//
//go:generate go test -run TestSettingsDoc . -update
var settings = []setting{
	{name: "REPLICATOR_REDIS_URL", def: defaultRedisURL, secret: true,
		forms:   "a `redis://`, `rediss://` or `unix://` URL",
		meaning: "the Redis to use, read as redis-py reads it: every query parameter is honoured or refused by name, and a Redis Cluster's further seeds are given as `?addr=host:port` ([the forms](#replicator_redis_url)). Logged with the password redacted",
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
		forms:   "`" + backendLocal + "` or `" + backendGCS + "`",
		meaning: "where bodies are stored ([storage.md](storage.md))",
		set: func(c *Config, v string) error {
			if v != backendLocal && v != backendGCS {
				return errors.New("want local or gcs")
			}
			c.BlobBackend = v
			return nil
		}},
	{name: "REPLICATOR_BLOB_DIR", def: "blobs", blank: blankEmpty, blankText: "the working directory",
		forms:   "a directory",
		meaning: "local: root of the blob tree, relative to the working directory",
		set: func(c *Config, v string) error {
			if v == "" {
				v = "." // the reference's Path("")
			}
			c.BlobDir = v
			return nil
		}},
	{name: "REPLICATOR_BLOB_BUCKET", def: "", blank: blankDefault,
		forms:   "a bucket name",
		meaning: "gcs: the bucket; required with `gcs`",
		set:     func(c *Config, v string) error { c.BlobBucket = v; return nil }},
	{name: "REPLICATOR_BLOB_PREFIX", def: "blobs", blank: blankEmpty, blankText: "the bucket root",
		forms:   "an object name prefix; slashes at either end are dropped",
		meaning: "gcs: where the blobs' object names start",
		set:     func(c *Config, v string) error { c.BlobPrefix = strings.Trim(v, "/"); return nil }},
	{name: "REPLICATOR_BLOB_TIMEOUT_SECONDS", def: secondsText(gcs.DefaultTimeout),
		forms:   formSeconds,
		meaning: "gcs: bound on each storage operation",
		set:     seconds(func(c *Config) *time.Duration { return &c.BlobTimeout }, false)},
	{name: "REPLICATOR_BLOB_TTL_SECONDS", def: secondsText(local.DefaultTTL),
		forms:   formSeconds,
		meaning: "retention after a blob's last reference: the local sweep reaps at it; on gcs it sets the announced `blob_expires_at` (the bucket's lifecycle rule reaps)",
		set:     seconds(func(c *Config) *time.Duration { return &c.BlobTTL }, false)},
	{name: "REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS", def: secondsText(local.DefaultSweepInterval),
		forms:   formSeconds + formLocalOnly,
		meaning: "local: how often the sweep runs",
		set:     localOnly(pyFloatOnly, seconds(func(c *Config) *time.Duration { return &c.BlobSweepInterval }, false))},
	{name: "REPLICATOR_BLOB_TEMP_GRACE_SECONDS", def: secondsText(local.DefaultTempGrace),
		forms:   formSeconds + formLocalOnly,
		meaning: "local: age at which a leftover temp file is removed",
		set:     localOnly(pyFloatOnly, seconds(func(c *Config) *time.Duration { return &c.BlobTempGrace }, false))},
	{name: "REPLICATOR_BLOB_MAX_TOTAL_BYTES", def: strconv.Itoa(local.DefaultMaxTotalBytes),
		forms:   formBytes + formLocalOnly,
		meaning: "local: bytes held, stores in progress included, at which new fetches park until a sweep frees space (so do they while the disk has less than 1 MiB free: [storage.md, local](storage.md#local)); the tree is measured (the first sweep) before the first command is read",
		set:     localOnly(pyIntOnly, positiveInt64(func(c *Config) *int64 { return &c.BlobMaxTotalBytes }))},
	{name: "REPLICATOR_CONSUMER_GROUP", def: contentfetch.DefaultGroup,
		forms:   "a group name",
		meaning: "consumer group on `content.fetch`",
		set:     func(c *Config, v string) error { c.ConsumerGroup = v; return nil }},
	{name: "REPLICATOR_REPLICATE_CONSUMER_GROUP", def: replicate.DefaultGroup,
		forms:   "a group name",
		meaning: "consumer group on `content.replicate` ([replicate.md](replicate.md))",
		set:     func(c *Config, v string) error { c.ReplicateConsumerGroup = v; return nil }},
	{name: "REPLICATOR_REPLICATION_ALIASES_FILE", def: "", blank: blankDefault,
		forms:   "a file",
		meaning: "JSON file of the stores `content.replicate` may write ([replicate.md, The alias file](replicate.md#the-alias-file)); none provisions nothing",
		set:     func(c *Config, v string) error { c.ReplicationAliasesFile = v; return nil }},
	{name: "REPLICATOR_REPLICATE_WRITE_TIMEOUT_SECONDS", def: secondsText(replicate.DefaultWriteTimeout),
		forms:   formWholeSeconds,
		meaning: "bound on one `content.replicate` write ([replicate.md, The write](replicate.md#the-write))",
		set: func(c *Config, v string) error {
			if err := pyIntOnly(v); err != nil {
				return err
			}
			return seconds(func(c *Config) *time.Duration { return &c.ReplicateWriteTimeout }, false)(c, v)
		}},
	{name: "REPLICATOR_PERMANENT_BUCKET", def: "", blank: blankDefault,
		forms:   "a bucket name",
		meaning: "the permanent store's bucket: `content.persist` keeps blobs there as `gs://<bucket>/blobs/<sha256>.bin`, which never expires ([persist.md](persist.md)), `content.replicate` also copies from there, and no alias may bind it ([replicate.md, The source](replicate.md#the-source)); none reads the temp store only, and persist cannot run",
		set:     func(c *Config, v string) error { c.PermanentBucket = v; return nil }},
	{name: "REPLICATOR_CONSUMER_NAME", def: "", blank: blankDefault,
		shownDef: "derived from the group: `" + engine.ConsumerName(contentfetch.DefaultGroup) + "`",
		forms:    "a consumer name",
		meaning:  "this worker's name in the `content.fetch` group. Unset, it is the group with its dots as dashes and `-1` (the slot), the same on every host: a second worker in the group needs its own (`-2` upward) ([operations.md, Consumer names](operations.md#consumer-names))",
		set:      func(c *Config, v string) error { c.ConsumerName = v; return nil }},
	{name: "REPLICATOR_REPLICATE_CONSUMER_NAME", def: "", blank: blankDefault,
		shownDef: "derived from the group: `" + engine.ConsumerName(replicate.DefaultGroup) + "`",
		forms:    "a consumer name",
		meaning:  "this worker's name in the `content.replicate` group, as `REPLICATOR_CONSUMER_NAME` is in the fetch group",
		set:      func(c *Config, v string) error { c.ReplicateConsumerName = v; return nil }},
	{name: "REPLICATOR_CONSUMER_START_ID", def: engine.DefaultStartID,
		forms:   "`$`, `0` or a stream id (`<milliseconds>-<sequence>`)",
		meaning: "where the group starts when a worker process creates it (`$`: new commands only; `0`: the whole backlog). A group that vanishes later (Redis restarted empty) is recreated where the worker left off ([streams.md, Group](streams.md#group))",
		set: func(c *Config, v string) error {
			if v != "$" && !streamID.MatchString(v) {
				return errors.New("want $, 0 or a stream id like 1700000000000-0")
			}
			c.ConsumerStartID = v
			return nil
		}},
	{name: "REPLICATOR_READ_BLOCK_MS", def: millisText(engine.DefaultReadBlock),
		forms:   formMillis,
		meaning: "how long one read blocks; also how long a command parked for want of blob storage room waits before it is asked about again",
		set:     millis(func(c *Config) *time.Duration { return &c.ReadBlock })},
	{name: "REPLICATOR_CLAIM_MIN_IDLE_MS", def: millisText(engine.DefaultClaimMinIdle),
		forms:   formMillis,
		meaning: "idle time before a pending entry is reclaimed: the retry cadence of transient failures",
		set:     millis(func(c *Config) *time.Duration { return &c.ClaimMinIdle })},
	{name: "REPLICATOR_MAX_DELIVERY_ATTEMPTS", def: strconv.Itoa(engine.DefaultMaxDeliveryAttempts),
		forms:   formAtLeastOne,
		meaning: "deliveries of an unclassified failure (a bug, a store refused for good) before `handler_error` and the dead letter; transient outcomes and deliveries left pending unhandled do not count",
		set:     atLeastOne(func(c *Config) *int { return &c.MaxDeliveryAttempts })},
	{name: "REPLICATOR_ERROR_BACKOFF_BASE_SECONDS", def: secondsText(engine.DefaultBackoffBase),
		forms:   formSeconds,
		meaning: "first back-off after a failed cycle (Redis trouble); each further failed cycle in a row doubles it, up to `REPLICATOR_ERROR_BACKOFF_MAX_SECONDS`",
		set:     seconds(func(c *Config) *time.Duration { return &c.ErrorBackoffBase }, false)},
	{name: "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS", def: secondsText(engine.DefaultBackoffMax),
		forms:   formSeconds,
		meaning: "longest back-off; below the base, the base is used throughout, with a warning at start-up",
		set:     seconds(func(c *Config) *time.Duration { return &c.ErrorBackoffMax }, false)},
	{name: "REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES", def: strconv.Itoa(engine.DefaultMaxConsecutiveFailures),
		forms: formAtLeastOne,
		meaning: "sets the outage limit: the worker exits 1 for its supervisor once Redis has kept failing for the back-offs between this many failed cycles in a row (" +
			seconds2text(engine.Config{}.OutageLimit()) + " s at the defaults), however long each attempt waits; logged at start-up as `outage_limit_seconds` ([streams.md, Broker trouble](streams.md#broker-trouble))",
		set: atLeastOne(func(c *Config) *int { return &c.MaxConsecutiveCycleFailures })},
	{name: "REPLICATOR_DEDUPE_TTL_SECONDS", def: secondsText(engine.DefaultDedupeTTL),
		forms:   formWholeSeconds,
		meaning: "lifetime of a handled command's dedupe key, `" + contentfetch.DefaultDedupePrefix + "<command_id>` or `" + replicate.DefaultDedupePrefix + "<command_id>`",
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
	{name: "REPLICATOR_MAX_BLOB_BYTES", def: strconv.Itoa(fetch.DefaultMaxBodyBytes),
		forms:   formBytes,
		meaning: "largest body stored, counted after its content codings are removed; larger is `too_large`",
		set:     positiveInt64(func(c *Config) *int64 { return &c.MaxBlobBytes })},
	{name: "REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", def: secondsText(guard.DefaultMaxTimeout),
		forms:   formSeconds,
		meaning: "largest `timeout_seconds` a command may ask for; larger is `invalid_request_options`",
		set:     seconds(func(c *Config) *time.Duration { return &c.MaxFetchTimeout }, false)},
	{name: "REPLICATOR_MAX_FETCH_SECONDS",
		shownDef: "`" + seconds2text(fetch.DefaultMaxFetchTime) + "`",
		forms:    formSeconds + "; below `REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS`, that value is used, with a warning",
		meaning:  "bound on a whole fetch, all hops and pacing included; a fetch past it is transient. Never less than `REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS`. Also the lease of a pacing hold, and with a margin it sizes the shutdown drain ([below](#replicator_max_fetch_seconds))",
		set:      seconds(func(c *Config) *time.Duration { return &c.MaxFetchTime }, false),
		// Zero until the pairings: then the default, raised to the ceiling.
		ifUnset: func(c *Config) { c.MaxFetchTime = 0 }},
	{name: "REPLICATOR_BLOCKED_DESTINATIONS",
		shownDef: "none: the guard's own rules ([security.md](security.md#the-python-workers-deny-list))",
		forms:    "CIDR prefixes or addresses, comma-separated, host bits clear",
		meaning:  "ranges no fetch may reach, refused on every hop even inside `REPLICATOR_ALLOW_CIDRS`. The guard refuses every address that is not globally reachable unicast whatever this says: a list that leaves out a range of the Python worker's default set does not open it, and the worker warns at start-up",
		set: func(c *Config, v string) error {
			p, err := parseBlocked(v)
			if err != nil {
				return err
			}
			c.BlockedDestinations = p
			return nil
		},
		ifUnset: func(c *Config) { c.BlockedDestinations = nil }},
	{name: "REPLICATOR_PERSIST_ENABLED", def: "false",
		forms:   "a boolean as pydantic reads one: `true`, `false`, `1`, `0`, `yes`, `no`, `on`, `off`, `t`, `f`, `y`, `n`, in any case",
		meaning: "runs `content.persist` (group `" + persist.DefaultGroup + "`), which keeps blobs in `REPLICATOR_PERMANENT_BUCKET` for good; it needs that bucket. A broker that does not grant its stream leaves it off with one line, and the other capabilities run ([persist.md](persist.md))",
		set: func(c *Config, v string) error {
			on, err := pyBool(v)
			c.PersistEnabled = on
			return err
		}},
	{name: "REPLICATOR_MIN_HOST_INTERVAL_SECONDS", def: strconv.FormatFloat(policy.DefaultInterval.Seconds(), 'f', 1, 64),
		forms:   "seconds from 0 to 3600",
		meaning: "spacing between requests to a host without a published policy; `0` is no spacing ([politeness.md](politeness.md))",
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
		forms:   "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`, in any case; also `WARN`, `FATAL` and `NOTSET` (everything)",
		meaning: "the least severe log line written; any other name logs at `INFO`, with a warning, as the Python worker does",
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

	// The project's own.
	{name: "REPLICATOR_CONCURRENCY", def: strconv.Itoa(contentfetch.DefaultConcurrency), own: true,
		forms:   formCount,
		meaning: "requests in flight at once",
		set:     positiveInt(func(c *Config) *int { return &c.Concurrency })},
	{name: "REPLICATOR_MAX_HELD", def: "", own: true,
		shownDef: strconv.Itoa(contentfetch.DefaultHeldPerRequest) + " × `REPLICATOR_CONCURRENCY`, at least " + strconv.Itoa(contentfetch.MinDefaultMaxHeld),
		forms:    formCount,
		meaning:  "commands held in memory at once (waiting, parked or being handled). When full, the worker reads on only while some held commands wait for their host's window; those give their places to other hosts' commands, stay pending and are taken back once there is room ([politeness.md, Spending a wait](politeness.md#spending-a-wait)). `1` with a concurrency of 1 is the one-at-a-time design of the Python worker",
		set: func(c *Config, v string) error {
			if v == "" { // only when unset: a blank value is refused
				c.MaxHeld = 0
				return nil
			}
			return positiveInt(func(c *Config) *int { return &c.MaxHeld })(c, v)
		}},
	{name: "REPLICATOR_ALLOW_CIDRS", def: "", blank: blankDefault, own: true,
		forms:   "CIDR prefixes or addresses, comma- or space-separated",
		meaning: "what the destination guard lets through (private origins, tests); nothing else loosens it ([security.md, Allowing private origins](security.md#allowing-private-origins))",
		set: func(c *Config, v string) error {
			p, err := parseCIDRs(v)
			if err != nil {
				return err
			}
			c.AllowCIDRs = p
			return nil
		}},
	{name: "REPLICATOR_EGRESS_PROXY_CIDRS", def: "", blank: blankDefault, own: true,
		forms:   "CIDR prefixes or addresses, comma- or space-separated",
		meaning: "where the egress proxies may be. Set, the worker sends requests through the proxies `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` name (as Go reads them: loopback goes direct), each of which must lie in these prefixes; the guard still judges every target before a proxy is asked, and an https target is tunnelled to the address judged ([security.md, Egress proxies](security.md#egress-proxies)). None: the proxy variables are ignored and every connection is direct",
		set: func(c *Config, v string) error {
			p, err := parseCIDRs(v)
			if err != nil {
				return err
			}
			c.EgressProxyCIDRs = p
			return nil
		}},
	{name: "REPLICATOR_METRICS_ADDR", def: "", blank: blankDefault, own: true,
		forms:   "`host:port`",
		meaning: "where `/metrics` and `/healthz` are served; none is off",
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
	{name: "REPLICATOR_RESOLVE", def: "", blank: blankDefault, own: true,
		forms:   "`host=ip` pairs, comma- or space-separated; a host `*.example.test` stands for every name under `example.test`",
		meaning: "test and development only: answers DNS for those hosts, like curl's `--resolve`; a host repeated answers with several addresses, and a name's own entry beats a wildcard. The guard still judges every address, and the worker warns at start-up",
		set: func(c *Config, v string) error {
			if _, err := parseResolve(v); err != nil {
				return err
			}
			c.Resolve = v
			return nil
		}},
	{name: "REPLICATOR_ROBOTS", def: "ignore", blank: blankDefault, own: true,
		forms:   "`ignore` or `obey`, in any case",
		meaning: "`ignore`: no robots.txt request is ever made (the Python worker's behaviour). `obey`: every hop, redirect targets included, is judged against its origin's robots.txt ([politeness.md, robots.txt](politeness.md#robotstxt)); a disallowed URL ends `fetch_failed` · `robots_disallowed`, and a robots.txt that answers 429 or 5xx, or not at all, leaves the command transient until its back-off ends",
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
	{name: "REPLICATOR_MAX_CRAWL_DELAY_SECONDS", def: secondsText(robots.DefaultMaxCrawlDelay), own: true,
		forms:   "seconds from 0 to 3600; 0 ignores Crawl-delay",
		meaning: "under `REPLICATOR_ROBOTS=obey`, the cap on a robots.txt `Crawl-delay` taken as its host's floor when larger than the floor in force; a larger value is capped and the capping logged at INFO",
		set: func(c *Config, v string) error {
			if err := seconds(func(c *Config) *time.Duration { return &c.MaxCrawlDelay }, true)(c, v); err != nil {
				return err
			}
			if c.MaxCrawlDelay > time.Hour {
				return errors.New("over 3600")
			}
			return nil
		}},
	{name: "REPLICATOR_FLEET_PACING", def: fleetAuto, blank: blankDefault, own: true,
		forms:   "`" + fleetAuto + "`, `" + fleetOn + "` or `" + fleetOff + "`, in any case",
		meaning: "whether workers sharing this Redis share each host's spacing through it (scripts on `" + fleet.DefaultKeyPrefix + "*` keys) or each paces on its own. `auto`: on when `REPLICATOR_REDIS_URL` names no user (or `default`), off for a named user, whose ACL grants scripts only when the operator adds them; `on`: probed once at start-up, and a refusal is logged once, naming the grant, and paces locally ([operations.md, Redis ACL](operations.md#redis-acl))",
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case fleetAuto, fleetOn, fleetOff:
				c.FleetPacing = v
				return nil
			}
			return errors.New("want auto, on or off")
		}},

	// Read by the operator subcommands, never by the worker: leniently, as
	// the Python worker's scripts read them (a bad value is named and the
	// default used), since they run at start-up and on failure, where a
	// refusal would only make things worse.
	{name: "REPLICATOR_REDIS_FLOOR_TIMEOUT", def: "5", blank: blankDefault, by: byCheckRedis,
		forms:   "whole seconds > 0; anything else is named and the default used",
		meaning: "bound on one `replicator check-redis` probe of the Redis version ([operations.md, Start-up checks](operations.md#start-up-checks))",
		set:     lenientSeconds(func(c *Config) *time.Duration { return &c.RedisFloorTimeout }, 5, false, 0)},
	{name: "REPLICATOR_REDIS_FLOOR_WAIT", def: "30", blank: blankDefault, by: byCheckRedis,
		forms:   "whole seconds ≥ 0; anything else is named and the default used",
		meaning: "how long `replicator check-redis` retries a Redis it cannot reach before reporting the floor unverified; `0` probes once",
		set:     lenientSeconds(func(c *Config) *time.Duration { return &c.RedisFloorWait }, 30, true, 0)},
	{name: "REPLICATOR_NOTIFY_URL", def: "", blank: blankDefault, by: byNotify, secret: true,
		forms:   "an `http://` or `https://` URL",
		meaning: "where `replicator notify-failure` POSTs the incident when a unit fails; none records it in the journal only ([operations.md, Failure notification](operations.md#failure-notification))",
		set:     func(c *Config, v string) error { c.NotifyURL = v; return nil }},
	{name: "REPLICATOR_NOTIFY_TOKEN", def: "", blank: blankDefault, by: byNotify, secret: true,
		forms:   "a credential, on one line",
		meaning: "sent as `Authorization: Bearer` (webhook mode) or `X-API-Key` (notifier mode); none sends no header. A value with a line break is dropped, with a line saying so",
		set: func(c *Config, v string) error {
			if strings.ContainsAny(v, "\r\n") {
				c.Warnings = append(c.Warnings, "REPLICATOR_NOTIFY_TOKEN contains a line break; dispatching without it")
				v = ""
			}
			c.NotifyToken = v
			return nil
		}},
	{name: "REPLICATOR_NOTIFY_TIMEOUT_SECONDS", def: "10", blank: blankDefault, by: byNotify,
		forms:   "whole seconds from 1 to " + strconv.Itoa(notifyTimeoutMax) + "; anything else is named and the default (or the ceiling) used",
		meaning: "bound on one dispatch, well inside the handler unit's `TimeoutStartSec`",
		set:     lenientSeconds(func(c *Config) *time.Duration { return &c.NotifyTimeout }, 10, false, notifyTimeoutMax)},
	{name: "REPLICATOR_NOTIFY_MODE", def: notifyWebhook, blank: blankDefault, by: byNotify,
		forms:   "`" + notifyWebhook + "` or `" + notifyNotifier + "`; anything else dispatches nothing, with a line saying so",
		meaning: "`webhook` POSTs the incident as it is; `notifier` wraps it in the cohort notifier's `/dispatch` request and scores delivery on the answer's `status`",
		set:     func(c *Config, v string) error { c.NotifyMode = v; return nil }},
	{name: "REPLICATOR_NOTIFY_TEMPLATE_ID", def: "", blank: blankDefault, by: byNotify,
		forms:   "a 26-character ULID",
		meaning: "notifier mode: the stored template's id; required there",
		set:     func(c *Config, v string) error { c.NotifyTemplateID = v; return nil }},
	{name: "REPLICATOR_NOTIFY_CHANNEL_IDS", def: "", blank: blankDefault, by: byNotify,
		forms:   "26-character ULIDs, comma-separated; white space is dropped",
		meaning: "notifier mode: the channels to deliver on; at least one required there",
		set: func(c *Config, v string) error {
			c.NotifyChannelIDs = nil
			for part := range strings.SplitSeq(v, ",") {
				if part = strings.Join(strings.Fields(part), ""); part != "" {
					c.NotifyChannelIDs = append(c.NotifyChannelIDs, part)
				}
			}
			return nil
		}},

	// The Python worker's settings this worker knows and does not read.
	{name: "REPLICATOR_ALLOW_ANY_CHECKOUT", blank: blankDefault, by: byNone,
		forms:   "`1`",
		meaning: "the Python worker's bypass of its main-checkout start guard; this worker is a built binary, with no checkout to guard",
		set:     func(*Config, string) error { return nil }},
	{name: "REPLICATOR_WHEELHOUSE_CREDENTIALS", blank: blankDefault, by: byNone,
		forms:   "a key file",
		meaning: "the Python worker's credentials for refreshing its package index at start; this worker installs no packages",
		set:     func(*Config, string) error { return nil }},
	testSuiteSetting("REPLICATOR_TEST_REDIS_URL"),
	testSuiteSetting("REPLICATOR_TEST_GCS_BUCKET"),
	testSuiteSetting("REPLICATOR_TEST_BLOB_BUCKET"),
	testSuiteSetting("REPLICATOR_TEST_GCS_CREDENTIALS"),
}

// testSuiteSetting is one of the Python worker's test-suite variables: its
// tests', not a deployment's; this project's tests start their own servers.
func testSuiteSetting(name string) setting {
	return setting{name: name, blank: blankDefault, by: byNone, forms: "any",
		meaning: "the Python worker's test suite's; not read",
		set:     func(*Config, string) error { return nil }}
}

// REPLICATOR_FLEET_PACING's values.
const (
	fleetAuto = "auto"
	fleetOn   = "on"
	fleetOff  = "off"
)

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

// loadConfig reads every REPLICATOR_* setting the worker reads through
// lookup (os.LookupEnv in production). An unset variable takes its default;
// a blank one means what blankMeaning says for its setting; any other value
// must be valid. Every invalid one is reported (joined), each naming the
// variable and the value (a Redis URL's password redacted). The errors wrap
// errSetting.
func loadConfig(lookup func(string) (string, bool)) (Config, error) {
	c, err := loadSettings(byWorker, lookup)
	if err != nil {
		return Config{}, err
	}
	var errs []error
	// Pairings, checked once every value parses.
	if c.BlobBackend == backendGCS && c.BlobBucket == "" {
		errs = append(errs, fmt.Errorf("%w: REPLICATOR_BLOB_BACKEND=gcs needs REPLICATOR_BLOB_BUCKET", errSetting))
	}
	if c.PersistEnabled && c.PermanentBucket == "" {
		// As the reference refuses it: persisting with nowhere to keep.
		errs = append(errs, fmt.Errorf("%w: REPLICATOR_PERSIST_ENABLED=true needs REPLICATOR_PERMANENT_BUCKET", errSetting))
	}
	if c.ConsumerGroup == c.ReplicateConsumerGroup {
		// As the reference refuses it: each group's consumer-name override
		// is chosen by its group, and two groups spelled alike leave no way
		// to tell which applies.
		errs = append(errs, fmt.Errorf("%w: REPLICATOR_CONSUMER_GROUP and REPLICATOR_REPLICATE_CONSUMER_GROUP must name different groups (both are %q): each group's consumer name is chosen by its group",
			errSetting, c.ConsumerGroup))
	}
	c.ConsumerName = consumerNameFor(c.ConsumerName, c.ConsumerGroup)
	c.ReplicateConsumerName = consumerNameFor(c.ReplicateConsumerName, c.ReplicateConsumerGroup)
	switch {
	case c.MaxFetchTime == 0: // unset: the default, never below the ceiling
		c.MaxFetchTime = max(fetch.DefaultMaxFetchTime, c.MaxFetchTimeout)
	case c.MaxFetchTime < c.MaxFetchTimeout:
		// The reference's bound is never less than the ceiling either: a
		// command may not be allowed a timeout no fetch could use.
		c.Warnings = append(c.Warnings, fmt.Sprintf("REPLICATOR_MAX_FETCH_SECONDS=%s is below REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=%s; bounding fetches at %s",
			seconds2text(c.MaxFetchTime), seconds2text(c.MaxFetchTimeout), seconds2text(c.MaxFetchTimeout)))
		c.MaxFetchTime = c.MaxFetchTimeout
	}
	if c.BlockedDestinations != nil {
		if left := openedByBlocked(c.BlockedDestinations); len(left) > 0 {
			c.Warnings = append(c.Warnings, fmt.Sprintf("REPLICATOR_BLOCKED_DESTINATIONS leaves out %s, which the Python worker would then fetch; this worker's guard still refuses every address that is not globally reachable unicast, unless REPLICATOR_ALLOW_CIDRS allows it",
				strings.Join(left, ", ")))
		}
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

// loadSettings reads the settings command reads, as loadConfig describes,
// without the worker's pairings.
func loadSettings(command reader, lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	for _, s := range settings {
		if s.by != command {
			continue
		}
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
		if l := (*lenient)(nil); errors.As(err, &l) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s=%q %s; using %s", s.name, v, l.why, l.use))
			use, _, _ := strings.Cut(strings.TrimPrefix(l.use, "the default, "), " ")
			err = s.set(&c, use)
		}
		if err != nil {
			shown := v
			if s.secret {
				shown = guard.RedactURL(v)
			}
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", errSetting, s.name, shown, err))
		}
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
	return loadFrom(byWorker, environ)
}

// loadFrom is loadConfigFrom for the settings command reads; only the
// worker warns about variables it does not know.
func loadFrom(command reader, environ []string) (Config, error) {
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
	lookup := func(name string) (string, bool) {
		if entries := byName[name]; len(entries) > 0 {
			return valueOf(entries[0]), true
		}
		return "", false
	}
	if command != byWorker {
		return loadSettings(command, lookup)
	}
	c, err := loadConfig(lookup)
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

// lenient is what a lenient setting's set returns for a value it will not
// take: loadSettings names the value in a warning and sets use instead, as
// the Python worker's scripts do rather than refusing to run.
type lenient struct {
	why string // what is wrong with the value
	use string // the value taken instead
}

func (l *lenient) Error() string { return l.why + "; using " + l.use }

// lenientSeconds reads whole seconds as the Python worker's scripts do: a
// value that is not a whole number (or is 0, unless zeroOK) is replaced by
// def, one over ceiling (when positive) by ceiling.
func lenientSeconds(field func(*Config) *time.Duration, def int, zeroOK bool, ceiling int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || strings.ContainsAny(v, "+-") || (n == 0 && !zeroOK):
			return &lenient{why: "is not a whole number of seconds" + map[bool]string{true: "", false: " above 0"}[zeroOK], use: "the default, " + strconv.Itoa(def)}
		case ceiling > 0 && n > ceiling:
			return &lenient{why: "is above the " + strconv.Itoa(ceiling) + " s ceiling", use: strconv.Itoa(ceiling)}
		}
		*field(c) = time.Duration(n) * time.Second
		return nil
	}
}

// secondsText writes a default duration as its setting reads it: whole
// seconds, or a decimal fraction.
func secondsText(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// millisText writes a default duration in whole milliseconds.
func millisText(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
