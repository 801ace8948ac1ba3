package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replicator-go/replicator/sink"
)

// blobTable is a sink.Sink that keeps bodies as rows of a table, the way a
// service would keep them in its own database: one row per fingerprint, the
// bytes plus some bookkeeping, and a log line for every write. It stands in
// for the local or gcs backends to show that the fetcher needs nothing of a
// sink but Put and Open; it keeps a column for the media type, which the
// fetcher hands over in Put's options.
//
// A blobTable is safe for concurrent use. Its zero value is not; use
// newBlobTable.
type blobTable struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	rows map[string]*row
}

// row is one stored body.
type row struct {
	Fingerprint string
	Data        []byte
	MediaType   string // as the first store gave it
	FirstStored time.Time
	LastStored  time.Time
	// Refs counts the Puts that stored or re-referenced these bytes.
	Refs int
}

var _ sink.Sink = (*blobTable)(nil)

func newBlobTable(log *slog.Logger) *blobTable {
	return &blobTable{log: log, now: time.Now, rows: map[string]*row{}}
}

// uri names a row the way the table's readers would address it.
func uri(fingerprint string) string { return "db://blobs/" + fingerprint }

// Put reads r once, hashing it with sink.Copy (which also enforces the
// limit and checks ctx between reads), and inserts the row only when the
// whole body arrived: a failed or oversized store leaves nothing. A new row
// keeps opts.MediaType; identical bytes stored again keep the first.
func (t *blobTable) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	var buf bytes.Buffer
	fp, n, err := sink.Copy(ctx, &buf, r, opts.Limit)
	if err != nil {
		return sink.Blob{}, err
	}
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	now := t.now()
	t.mu.Lock()
	rw, ok := t.rows[fp]
	if !ok {
		mediaType := opts.MediaType
		if mediaType == "" {
			mediaType = sink.DefaultMediaType
		}
		rw = &row{Fingerprint: fp, Data: buf.Bytes(), MediaType: mediaType, FirstStored: now}
		t.rows[fp] = rw
	}
	rw.LastStored = now
	rw.Refs++
	refs := rw.Refs
	t.mu.Unlock()
	t.log.Info("blob stored", "fingerprint", fp, "size_bytes", n, "created", !ok, "refs", refs)
	return sink.Blob{Fingerprint: fp, Size: n, URI: uri(fp), Created: !ok}, nil
}

// Open returns a row's bytes.
func (t *blobTable) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	rw, ok := t.rows[fingerprint]
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("blob table: %s: %w", fingerprint, sink.ErrNotFound)
	}
	// Data is never modified once inserted, so the reader needs no lock.
	return io.NopCloser(bytes.NewReader(rw.Data)), nil
}

// dump writes the table, one row a line, in fingerprint order.
func (t *blobTable) dump(w io.Writer) {
	t.mu.Lock()
	rows := make([]row, 0, len(t.rows))
	for _, r := range t.rows {
		rows = append(rows, *r)
	}
	t.mu.Unlock()
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	fmt.Fprintf(w, "table: %d rows\n", len(rows))
	for _, r := range rows {
		fmt.Fprintf(w, "  %s  %d bytes  %s  refs=%d  uri=%s\n", r.Fingerprint, len(r.Data), r.MediaType, r.Refs, uri(r.Fingerprint))
	}
}
