package envelope_test

import (
	"testing"

	"github.com/replicator-go/replicator/envelope"
)

// fullBlob is a blob_available with every optional field set.
func fullBlob() *envelope.BlobAvailable {
	return &envelope.BlobAvailable{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:19:00.654321Z"),
		ContentFingerprint: fp,
		BlobURI:            "gs://co-blobs/blobs/" + fp + ".bin",
		SizeBytes:          1024,
		MediaType:          "text/html",
		URL:                "https://example.test/a?b=1&c=2",
		CommandID:          cid,
		InfoSourceID:       "isrc-01JQ8Z",
		FinalURL:           new("https://example.test/a/landing"),
		StatusCode:         new(200),
		FetchedAt:          ptrTime("2026-11-29T23:18:59.987654Z"),
		ContentTypeRaw:     new("text/html; charset=utf-8"),
		ETag:               new(`W/"v1-abc"`),
		LastModified:       new("Sun, 29 Nov 2026 20:00:00 GMT"),
		BlobExpiresAt:      ptrTime("2026-12-06T23:18:59.900001Z"),
	}
}

func BenchmarkToWire(b *testing.B) {
	m := fullBlob()
	fields, err := envelope.ToWire(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(fields["payload"])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.ToWire(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromWire(b *testing.B) {
	fields, err := envelope.ToWire(fullBlob())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(fields["payload"])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.FromWire(fields); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToFrame(b *testing.B) {
	m := fullBlob()
	frame, err := envelope.ToFrame(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame[1])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.ToFrame(m); err != nil {
			b.Fatal(err)
		}
	}
}
