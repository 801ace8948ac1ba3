package sink_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

func TestCopy(t *testing.T) {
	data := sinktest.Bytes(1, 200_000)
	for _, tc := range []struct {
		name      string
		size      int
		limit     int64
		wantErr   error
		wantWrote int // bytes that reached the writer
	}{
		{name: "no limit", size: 200_000, limit: 0, wantWrote: 200_000},
		{name: "exact", size: 200_000, limit: 200_000, wantWrote: 200_000},
		{name: "one over", size: 200_000, limit: 199_999, wantErr: sink.ErrTooLarge, wantWrote: 196_608},
		{name: "empty", size: 0, limit: 1, wantWrote: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bytes.Buffer
			fp, n, err := sink.Copy(context.Background(), &w, bytes.NewReader(data[:tc.size]), tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Copy error = %v, want %v", err, tc.wantErr)
			}
			if w.Len() > tc.wantWrote || (tc.limit > 0 && int64(w.Len()) > tc.limit) {
				t.Errorf("wrote %d bytes, want at most %d and never past the limit", w.Len(), tc.wantWrote)
			}
			if tc.wantErr != nil {
				return
			}
			got := struct {
				FP string
				N  int64
			}{fp, n}
			want := struct {
				FP string
				N  int64
			}{sinktest.Fingerprint(data[:tc.size]), int64(tc.size)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Copy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckFingerprint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{strings.Repeat("0", 64), true},
		{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", true},
		{strings.Repeat("A", 64), false},
		{strings.Repeat("0", 63), false},
		{strings.Repeat("0", 65), false},
		{"../" + strings.Repeat("0", 61), false},
		{"", false},
		{"nope", false},
	} {
		err := sink.CheckFingerprint(tc.in)
		if tc.want && err != nil {
			t.Errorf("CheckFingerprint(%q) = %v, want nil", tc.in, err)
		}
		if !tc.want && !errors.Is(err, sink.ErrNotFound) {
			t.Errorf("CheckFingerprint(%q) = %v, want ErrNotFound", tc.in, err)
		}
	}
}

func BenchmarkCopy(b *testing.B) {
	data := sinktest.Bytes(1, 8<<20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := sink.Copy(context.Background(), discard{}, bytes.NewReader(data), 0); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
