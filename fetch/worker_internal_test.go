package fetch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

func TestWorkerBackoff(t *testing.T) {
	w := NewWorker(nil, nil, WorkerOptions{Consumer: "c", Logger: slog.New(slog.DiscardHandler)})
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{failures: 1, want: time.Second},
		{failures: 2, want: 2 * time.Second},
		{failures: 3, want: 4 * time.Second},
		{failures: 5, want: 16 * time.Second},
		{failures: 6, want: 30 * time.Second},
		{failures: 10000, want: 30 * time.Second},
	}
	for _, tt := range tests {
		if got := w.backoff(tt.failures); got != tt.want {
			t.Errorf("backoff(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
}

func TestWorkerHealthyAt(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0
	w := NewWorker(nil, nil, WorkerOptions{
		Consumer: "c", ReadBlock: time.Second, ClaimMinIdle: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler), now: func() time.Time { return now },
	})
	if w.HealthyAt(t0) {
		t.Error("healthy before the group exists")
	}
	w.groupReady.Store(true)
	if w.HealthyAt(t0) {
		t.Error("healthy before Redis ever answered")
	}
	w.markOK()
	tests := []struct {
		name  string
		after time.Duration
		want  bool
	}{
		{name: "just answered", after: 0, want: true},
		{name: "within 3 read blocks", after: 3 * time.Second, want: true},
		{name: "silent for longer", after: 3*time.Second + time.Millisecond, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.HealthyAt(t0.Add(tt.after)); got != tt.want {
				t.Errorf("HealthyAt(+%v) = %v, want %v", tt.after, got, tt.want)
			}
		})
	}
}

func TestHostQueueKeepsArrivalOrder(t *testing.T) {
	q := &hostQueue{host: "h"}
	due := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, it := range []*item{{id: "c", seq: 3}, {id: "a", seq: 1, due: due}, {id: "b", seq: 2}} {
		q.insert(it)
	}
	var got []string
	for _, it := range q.waiting {
		got = append(got, it.id)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("queue order mismatch (-want +got):\n%s", diff)
	}
	if q.parked != 1 {
		t.Errorf("parked = %d, want 1", q.parked)
	}
	if it := q.pop(); it.id != "a" || q.parked != 0 {
		t.Errorf("pop = %s with %d parked left, want a and 0", it.id, q.parked)
	}
}

// TestWorkerDeadLettersEntriesWithoutFields covers what real Redis 7 no
// longer produces but older servers did: an entry delivered without its
// fields. It is re-read by id; when gone, a synthesized record carries the
// id, so the entry can never stick.
func TestWorkerDeadLettersEntriesWithoutFields(t *testing.T) {
	r := testenv.StartRedis(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	w := NewWorker(client, nil, WorkerOptions{Consumer: "c", StartID: "0", Logger: slog.New(slog.DiscardHandler)})
	if err := w.createGroup(ctx); err != nil {
		t.Fatal(err)
	}
	add := client.B().Xadd().Key(w.o.Stream).Id("*").FieldValue().
		FieldValue("payload", "{").FieldValue(FieldDLQReason, "old").Build()
	id, err := client.Do(ctx, add).ToString()
	if err != nil {
		t.Fatal(err)
	}

	if err := w.accept(ctx, []rueidis.XRangeSlice{{ID: id}, {ID: "1-1"}}); err != nil {
		t.Fatalf("accept: %v", err)
	}
	got, err := client.Do(ctx, client.B().Xrange().Key(w.o.DLQStream).Start("-").End("+").Build()).AsXRangeSlices()
	if err != nil {
		t.Fatal(err)
	}
	var fields [][]rueidis.XRangeFieldValue
	for _, e := range got {
		fields = append(fields, e.FieldValues)
	}
	want := [][]rueidis.XRangeFieldValue{
		{
			{Field: "payload", Value: "{"},
			{Field: FieldDLQReason, Value: DLQMalformedFrame},
			{Field: FieldDLQOriginalID, Value: id},
		},
		{
			{Field: "error", Value: "entry delivered without fields and no longer in the stream"},
			{Field: "original_message_id", Value: "1-1"},
			{Field: "original_topic", Value: DefaultStream},
			{Field: FieldDLQReason, Value: DLQMalformedFrame},
			{Field: FieldDLQOriginalID, Value: "1-1"},
		},
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("dead letters mismatch (-want +got):\n%s", diff)
	}
}
