package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
)

// Fleet pacing needs grants beyond the streams' (fleet.ACLRule). No
// command a Redis user may run tells it what it is granted, and a refused
// command is written to the broker's ACL LOG, which operators watch: so the
// worker does not find out by trying. REPLICATOR_FLEET_PACING says; auto
// reads the URL: the default user of a server without per-service users is
// granted everything, a named user of a broker with them only what its
// operator wrote (docs/operations.md, Redis ACL).

// wantFleetPacing tells whether the worker should pace through Redis, and
// why, from REPLICATOR_FLEET_PACING and the Redis URL's user.
func wantFleetPacing(cfg Config) (bool, string) {
	switch cfg.FleetPacing {
	case fleetOn:
		return true, "REPLICATOR_FLEET_PACING=on"
	case fleetOff:
		return false, "REPLICATOR_FLEET_PACING=off"
	}
	user := ""
	if t, err := parseRedisURL(cfg.RedisURL); err == nil {
		user = t.opt.Username
	}
	if user == "" || user == "default" {
		return true, "REPLICATOR_FLEET_PACING=auto and the Redis URL names no user"
	}
	return false, "REPLICATOR_FLEET_PACING=auto and the Redis URL names the user " + user
}

// probeTimeout bounds the start-up probe of fleet pacing.
const probeTimeout = 10 * time.Second

// choosePacer returns the pacer the worker's fetches use: the fleet's when
// wanted and granted, else local, which is logged once with the grant that
// would turn fleet pacing on. local is the fleet pacer's own fallback.
func choosePacer(ctx context.Context, client rueidis.Client, want bool, why string, local *policy.Local, log *slog.Logger) (policy.Pacer, *fleet.Pacer) {
	if !want {
		log.Info("fleet pacing off: each worker spaces requests to a host on its own", "why", why,
			"to_turn_on", "grant the worker's Redis user "+fleet.ACLRule+" and set REPLICATOR_FLEET_PACING=on")
		return local, nil
	}
	p := fleet.NewPacer(client, fleet.PacerOptions{Fallback: local, Logger: log})
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := p.Probe(pctx)
	if err != nil && redisacl.IsNoPerm(err) {
		log.Warn("fleet pacing refused by Redis: each worker spaces requests to a host on its own", "why", why,
			"error", err.Error(), "grant", fleet.ACLRule)
		return local, nil
	}
	if err != nil {
		// Redis trouble, not a grant: the pacer decides locally while it
		// lasts, and says so.
		log.Warn("could not probe fleet pacing at start-up; using it, with local decisions while Redis fails", "error", err.Error())
	}
	log.Info("fleet pacing on: workers sharing this Redis share each host's spacing", "why", why)
	return p, p
}
