package main

import (
	"log/slog"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
)

// reportOpenFiles tells the operator at start-up how the worker fits its
// open-file limit (limit, 0 when unknown) at concurrency. Below
// contentfetch.OpenFiles the fetcher bounds the bodies streaming to the store
// at once and its idle connections (contentfetch.FetcherOpenFiles), which is
// logged. Below contentfetch.MinOpenFiles even that cannot fit: under load
// fetches and stores fail with "too many open files" and their commands
// come back only through the reclaim, so the worker does not fail, it
// slows down, and the operator hears of it here.
func reportOpenFiles(log *slog.Logger, limit uint64, concurrency int) {
	if limit == 0 || limit >= uint64(contentfetch.OpenFiles(concurrency)) {
		return
	}
	if least := contentfetch.MinOpenFiles(concurrency); limit < uint64(least) {
		log.Warn("the open-file limit is below what REPLICATOR_CONCURRENCY needs; under load fetches and stores fail with \"too many open files\" (raise LimitNOFILE, docs/operations.md, Open files)",
			"open_file_limit", limit, "needed", least, "concurrency", concurrency)
		return
	}
	storing, idle := fetch.Options{MaxInFlight: concurrency, MaxOpenFiles: contentfetch.FetcherOpenFiles(limit)}.OpenFiles()
	log.Info("fitting the open-file limit: fewer bodies stream to the store at once and fewer idle connections are kept (docs/operations.md, Open files)",
		"open_file_limit", limit, "concurrency", concurrency, "bodies_storing_at_once", storing, "idle_connections", idle)
}
