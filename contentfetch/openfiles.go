package contentfetch

import (
	"math"

	"github.com/replicator-go/replicator/fetch"
)

// OpenFiles is how many file descriptors a worker whose Fetcher has
// concurrency requests in flight may hold at once when nothing bounds
// them: for each request its connection and, while the body streams to
// the sink, the sink's file or upload; the Fetcher's idle connections
// (fetch.Options.OpenFiles); and openFilesSpare for Redis, the metrics
// listener, the blob tree and logs (docs/operations.md, Open files).
func OpenFiles(concurrency int) int {
	_, idle := fetch.Options{}.OpenFiles()
	return 2*concurrency + idle + openFilesSpare
}

// MinOpenFiles is the lowest open-file limit a worker at concurrency fits
// into with a Fetcher built with FetcherOpenFiles: a connection per
// request in flight, openFilesSpare, and minShared for bodies streaming
// to the sink and idle connections to share. Below it, fetches and
// stores fail with "too many open files" under load.
func MinOpenFiles(concurrency int) int {
	return concurrency + openFilesSpare + minShared
}

// FetcherOpenFiles is the fetch.Options.MaxOpenFiles that keeps a worker
// within a process limit of limit open files: the limit less
// openFilesSpare, at least 1. Zero (no bound) when the limit is unknown
// (0).
func FetcherOpenFiles(limit uint64) int {
	if limit == 0 {
		return 0
	}
	return max(int(min(limit, math.MaxInt32))-openFilesSpare, 1)
}

const (
	openFilesSpare = 256
	minShared      = 128
)
