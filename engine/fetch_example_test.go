package engine_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/sink/local"
)

// ExampleNew_contentFetch runs content.fetch the way the replicator binary
// does: one engine.Config, a Fetcher whose MaxInFlight is the loop's
// concurrency, and a sink. Politeness waits longer than the Handler's
// MaxWait, the loop's ReadBlock, park commands in memory; the context given
// to Run also cuts waits short at shutdown.
func ExampleNew_contentFetch() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Error("redis", "error", err)
		return
	}
	defer client.Close()

	blobs, err := local.New(local.Options{Dir: "./blobs", Logger: log})
	if err != nil {
		log.Error("blob store", "error", err)
		return
	}
	fetcher := fetch.New(fetch.Options{
		Guard:       guard.New(guard.Options{}),
		Pacer:       fleet.NewPacer(client, fleet.PacerOptions{Logger: log}), // spacing shared by the fleet
		MaxInFlight: 16,                                                      // requests in flight
		Logger:      log,
	})
	defer fetcher.Close()

	cfg := engine.Config{Logger: log, Registerer: prometheus.DefaultRegisterer}.WithDefaults()
	handler := contentfetch.NewHandler(contentfetch.HandlerOptions{
		Fetcher: fetcher,
		Sink:    blobs,
		MaxWait: cfg.ReadBlock,
		Logger:  log,
	})
	l := engine.New(client, cfg, contentfetch.Capability(handler))
	if err := l.Run(ctx); err != nil {
		log.Error("content.fetch", "error", err)
		os.Exit(1) // a supervisor restarts the worker
	}
}
