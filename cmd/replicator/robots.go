package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicator-go/replicator/fetch/robots"
)

// robotsFor is the robots.txt cache REPLICATOR_ROBOTS=obey asks for, its
// counters registered on reg (when not nil); nil under ignore, so no
// robots.txt request is ever made (docs/politeness.md, robots.txt).
func robotsFor(cfg Config, log *slog.Logger, reg prometheus.Registerer) *robots.Cache {
	if !cfg.ObeyRobots {
		return nil
	}
	maxDelay := cfg.MaxCrawlDelay
	if maxDelay == 0 {
		maxDelay = robots.None // REPLICATOR_MAX_CRAWL_DELAY_SECONDS=0: Crawl-delay ignored
	}
	c := robots.New(robots.Options{MaxCrawlDelay: maxDelay, Logger: log})
	if reg == nil {
		return c
	}
	for result, count := range map[string]func(robots.Stats) uint64{
		"parsed":      func(s robots.Stats) uint64 { return s.Parsed },
		"unavailable": func(s robots.Stats) uint64 { return s.Unavailable },
		"unreachable": func(s robots.Stats) uint64 { return s.Unreachable },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "replicator_robots_fetches_total",
			Help:        "robots.txt requests by result: parsed (2xx), unavailable (4xx but 429: all allowed), unreachable (429, 5xx, no answer: all refused).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(count(c.Stats())) }))
	}
	for reason, count := range map[string]func(robots.Stats) uint64{
		"disallowed":  func(s robots.Stats) uint64 { return s.Disallowed },
		"unreachable": func(s robots.Stats) uint64 { return s.Withheld },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "replicator_robots_refusals_total",
			Help:        "URLs refused by robots.txt: disallowed by a rule, or withheld while the origin's robots.txt is unreachable.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(count(c.Stats())) }))
	}
	return c
}
