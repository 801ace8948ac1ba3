package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// nopCap is a Handler whose every frame is a command; the tests below
// never handle one.
type nopCap struct{}

func (nopCap) Decode(fields map[string]string) (*capability.Command, error) {
	return &capability.Command{ID: fields["key"], Value: fields["payload"]}, nil
}

func (nopCap) Handle(context.Context, *capability.Command) capability.Outcome {
	return capability.Outcome{Fate: capability.Retry}
}

func (nopCap) Failed(*capability.Command, string, string, int, time.Time) envelope.Model { return nil }

func TestLoopBackoff(t *testing.T) {
	l := newLoop(nil, testOptions(nopCap{}, nil))
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
		if got := l.backoff(tt.failures); got != tt.want {
			t.Errorf("backoff(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
}

func TestLoopHealthyAt(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	o := testOptions(nopCap{}, nil)
	o.ReadBlock, o.ClaimMinIdle = time.Second, 2*time.Second
	l := newLoop(nil, o)
	l.clock.now = func() time.Time { return t0 }
	if l.HealthyAt(t0) {
		t.Error("healthy before the group exists")
	}
	l.groupReady.Store(true)
	if l.HealthyAt(t0) {
		t.Error("healthy before Redis ever answered")
	}
	l.markOK()
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
			if got := l.HealthyAt(t0.Add(tt.after)); got != tt.want {
				t.Errorf("HealthyAt(+%v) = %v, want %v", tt.after, got, tt.want)
			}
		})
	}
}

// TestLoopDeadLettersEntriesWithoutFields covers what real Redis 7 no
// longer produces but older servers did: an entry delivered without its
// fields. It is re-read by id; when gone, a synthesized record carries the
// id, so the entry can never stick.
func TestLoopDeadLettersEntriesWithoutFields(t *testing.T) {
	r := testenv.StartRedis(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	o := testOptions(nopCap{}, nil)
	o.StartID = "0"
	l := newLoop(client, o)
	if err := l.ensureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	add := client.B().Xadd().Key(o.Stream).Id("*").FieldValue().
		FieldValue("payload", "{").FieldValue(envelope.FieldDLQReason, "old").Build()
	id, err := client.Do(ctx, add).ToString()
	if err != nil {
		t.Fatal(err)
	}

	r0 := newRun(l, ctx)
	if err := r0.accept(ctx, []entry{{ID: id}, {ID: "1-1"}}, time.Now()); err != nil {
		t.Fatalf("accept: %v", err)
	}
	got, err := client.Do(ctx, client.B().Xrange().Key(o.DLQStream).Start("-").End("+").Build()).AsXRangeSlices()
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
			{Field: envelope.FieldDLQReason, Value: envelope.DLQMalformedFrame},
			{Field: envelope.FieldDLQOriginalID, Value: id},
		},
		{
			{Field: "error", Value: "entry delivered without fields and no longer in the stream"},
			{Field: "original_message_id", Value: "1-1"},
			{Field: "original_topic", Value: o.Stream},
			{Field: envelope.FieldDLQReason, Value: envelope.DLQMalformedFrame},
			{Field: envelope.FieldDLQOriginalID, Value: "1-1"},
		},
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("dead letters mismatch (-want +got):\n%s", diff)
	}
}
