package worker_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/worker"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/sink/local"
)

// ExampleWorker wires a worker the way the replicator binary does: one
// number bounds requests in flight (the Fetcher's Slots), the Fetcher's
// MaxWait is the worker's ReadBlock, and the context given to Run also
// stops the Fetcher's pacing waits at shutdown.
func ExampleWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Error("redis", "error", err)
		return
	}
	defer client.Close()

	const concurrency = 16
	readBlock := 5 * time.Second
	blobs, err := local.New(local.Options{Dir: "./blobs", Logger: log})
	if err != nil {
		log.Error("blob store", "error", err)
		return
	}
	fetcher := fetch.New(fetch.Options{
		Guard:   guard.New(guard.Options{}),
		Pacer:   fleet.NewPacer(client, fleet.PacerOptions{Logger: log}), // spacing shared by the fleet
		Slots:   fetch.NewSlots(concurrency),                             // requests in flight
		MaxWait: readBlock,                                               // longer waits park the command
		Stop:    ctx.Done(),                                              // shutdown cuts pacing waits short
		Logger:  log,
	})
	defer fetcher.Close()
	handler := fetch.NewHandler(fetch.HandlerOptions{Fetcher: fetcher, Sink: blobs, Logger: log})

	w := worker.New(client, handler, worker.Options{
		ReadBlock:  readBlock,
		Logger:     log,
		Registerer: prometheus.DefaultRegisterer,
	})
	if err := w.Run(ctx); err != nil {
		log.Error("worker", "error", err)
		os.Exit(1) // a supervisor restarts the worker
	}
}
