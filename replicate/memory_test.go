package replicate_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

// randomReader yields n pseudo-random bytes without holding them.
func randomReader(seed uint64, n int64) io.Reader {
	r := rand.NewChaCha8([32]byte{byte(seed)})
	return io.LimitReader(r, n)
}

// storeLarge stores n pseudo-random bytes in a fresh local sink, streaming.
func storeLarge(t testing.TB, n int64) (*local.Sink, string) {
	t.Helper()
	src := newLocal(t)
	b, err := src.Put(context.Background(), randomReader(uint64(n), n), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return src, b.URI
}

// A 48 MiB blob crosses in far less memory than its size: it is streamed
// from the blob file to the provider, never held. The fake runs in a child
// process, so its own copy of the upload is not counted here.
func TestALargeBlobStreamsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 96 MiB through a child process")
	}
	const size = 48 << 20
	g := testenv.StartGCSProcess(t, destBucket)
	src, uri := storeLarge(t, size)
	aliases, _ := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: g.Client})
	cmd := command(uri, func(c *envelope.ContentReplicate) { c.Destination = "large.bin" })

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := h.Replicate(context.Background(), cmd)
	runtime.ReadMemStats(&after)

	if out.Fate != capability.Complete {
		t.Fatalf("outcome %v: %v", out.Name(), out.Err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("replicating %d bytes allocated %d bytes", size, allocated)
	if allocated > size/4 {
		t.Errorf("replicating %d bytes allocated %d bytes; want far less than the blob", size, allocated)
	}
	attrs, err := g.Client.Bucket(destBucket).Object(aliasKey(t, aliases, "large.bin")).Attrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Size != size {
		t.Errorf("object size %d, want %d", attrs.Size, size)
	}
}

func aliasKey(t testing.TB, a *replicate.Aliases, dest string) string {
	t.Helper()
	b, ok := a.Resolve("primary")
	if !ok {
		t.Fatal("no primary alias")
	}
	return b.Prefix + "/" + dest
}

// BenchmarkReplicate measures one 8 MiB copy: the bytes allocated per op
// stay a small fraction of the blob.
func BenchmarkReplicate(b *testing.B) {
	const size = 8 << 20
	g := testenv.StartGCSProcess(b, destBucket)
	src, uri := storeLarge(b, size)
	aliases, _ := primary(b)
	h := newHandler(b, replicate.Options{Source: src, Aliases: aliases, GCS: g.Client})
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		cmd := command(uri, func(c *envelope.ContentReplicate) { c.Destination = fmt.Sprintf("bench-%d.bin", i) })
		if out := h.Replicate(context.Background(), cmd); out.Fate != capability.Complete {
			b.Fatalf("outcome %v: %v", out.Name(), out.Err)
		}
	}
}
