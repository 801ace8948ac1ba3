package main

import (
	"log/slog"

	"github.com/replicator-go/replicator/contentfetch/worker"
)

// warnOpenFiles logs a warning when the process may open fewer files
// (limit, 0 when unknown) than a worker at concurrency may need at once.
// Past the limit fetches and stores fail with "too many open files" and
// their commands come back only through the reclaim, so the worker does
// not fail, it slows down: the operator hears of it at start-up instead.
func warnOpenFiles(log *slog.Logger, limit uint64, concurrency int) {
	need := worker.OpenFiles(concurrency)
	if limit == 0 || limit >= uint64(need) {
		return
	}
	log.Warn("the open-file limit is below what REPLICATOR_CONCURRENCY may need; under load fetches and stores fail with \"too many open files\" (raise LimitNOFILE, docs/operations.md, Open files)",
		"open_file_limit", limit, "needed", need, "concurrency", concurrency)
}
