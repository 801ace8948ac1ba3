// Command replicator fetches URLs on command, safely and politely, and
// announces each outcome as a fact.
//
// Usage:
//
//	replicator fetch [flags] URL     fetch one URL now, no Redis; print the fact
//	replicator worker                run the consume loop (settings from REPLICATOR_* env)
//	replicator seed [flags] URL...   publish content.fetch commands (--watch: wait for outcomes)
//	replicator status [flags]        show the fleet's streams, dead letters and pacing
//	replicator status inflight       print this worker's pending count (the patching gate)
//	replicator dlq [flags] [stats | trim --older-than D]
//	                                 print, tally or trim dead letters
//	replicator policy [flags] set HOST SECONDS | revoke HOST
//	                                 publish a per-host politeness policy
//	replicator check-redis           check Redis's version floor before the worker starts
//	replicator notify-failure UNIT   record a failed unit and notify (OnFailure= handler)
//
// Every subcommand has --help. Bad flags and settings exit 2.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func subcommands() []subcommand {
	return []subcommand{
		{"fetch", "fetch one URL now, without Redis, and print the resulting fact", runFetch},
		{"worker", "run the consume loop (settings from REPLICATOR_* variables)", runWorker},
		{"seed", "publish content.fetch commands and optionally watch their outcomes", runSeed},
		{"status", "show streams, groups, dead letters and pacing; status inflight: pending count", runStatusForms},
		{"dlq", "print, tally or trim dead letters (content.fetch.dlq by default)", runDLQ},
		{"policy", "publish a per-host politeness policy (set HOST SECONDS | revoke HOST)", runPolicy},
		{"check-redis", "check that Redis meets the worker's version floor (a start-up step)", runCheckRedis},
		{"notify-failure", "record a failed unit and POST it to REPLICATOR_NOTIFY_URL (OnFailure= handler)", runNotify},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks for a clean stop; restoring the default
		// disposition lets a second one end the process at once.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range subcommands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "replicator: unknown subcommand %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "replicator fetches URLs on command, safely and politely, and announces each outcome as a fact.")
	fmt.Fprintln(w, "\nUsage: replicator <subcommand> [flags] [args]\n\nSubcommands:")
	for _, c := range subcommands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'replicator <subcommand> --help' for its flags.")
}
