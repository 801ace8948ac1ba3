package streamstate

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// addDeadLetter writes a dead content_fetch command for rawURL at ms.
func addDeadLetter(t *testing.T, c rueidis.Client, ms int64, reason, rawURL string) {
	t.Helper()
	fields, err := envelope.ToWire(&envelope.ContentFetch{
		OccurredAt: time.UnixMilli(ms), CommandID: "01JCMD" + strconv.FormatInt(ms, 10), URL: rawURL, InfoSourceID: "src",
	})
	if err != nil {
		t.Fatal(err)
	}
	fields[envelope.FieldDLQReason], fields[envelope.FieldDLQOriginalID] = reason, "1-0"
	args := []string{"XADD", "dlq", strconv.FormatInt(ms, 10) + "-0"}
	for k, v := range fields {
		args = append(args, k, v)
	}
	do(t, c, args...)
}

func TestDeadLetters(t *testing.T) {
	c := client(t, testenvRedis(t))
	ctx := context.Background()
	addDeadLetter(t, c, 1000, "http_status", "https://A.example/1")
	addDeadLetter(t, c, 2000, "http_status", "https://b.example/2")
	addDeadLetter(t, c, 3000, "destination_refused", "https://a.example./3")
	addDeadLetter(t, c, 4000, "http_status", "https://a.example/4")
	// Undecodable, with a url member still readable.
	do(t, c, "XADD", "dlq", "5000-0", "event_type", "content_fetch", "payload", `{"url":"https://c.example/x"}`, "dlq_reason", "malformed_frame")
	// A synthesized record, with nothing but the reason.
	do(t, c, "XADD", "dlq", "6000-0", "dlq_reason", "malformed_frame")

	st, err := CountDeadLetters(ctx, c, "dlq", Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.UnixMilli
	want := Stats{
		Stream: "dlq",
		All:    Tally{Count: 6, Oldest: ms(1000).UTC(), Newest: ms(6000).UTC()},
		ByReason: []Tally{
			{Key: "http_status", Count: 3, Oldest: ms(1000).UTC(), Newest: ms(4000).UTC()},
			{Key: "malformed_frame", Count: 2, Oldest: ms(5000).UTC(), Newest: ms(6000).UTC()},
			{Key: "destination_refused", Count: 1, Oldest: ms(3000).UTC(), Newest: ms(3000).UTC()},
		},
		ByHost: []Tally{
			{Key: "a.example", Count: 3, Oldest: ms(1000).UTC(), Newest: ms(4000).UTC()},
			{Key: "", Count: 1, Oldest: ms(6000).UTC(), Newest: ms(6000).UTC()},
			{Key: "b.example", Count: 1, Oldest: ms(2000).UTC(), Newest: ms(2000).UTC()},
			{Key: "c.example", Count: 1, Oldest: ms(5000).UTC(), Newest: ms(5000).UTC()},
		},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	// Filters combine; the time bounds are inclusive.
	st, _ = CountDeadLetters(ctx, c, "dlq", Filter{Reason: "http_status", Host: "A.EXAMPLE", Since: ms(2000), Until: ms(4000)}, 0)
	if st.All.Count != 1 || st.All.Oldest != ms(4000).UTC() {
		t.Errorf("filtered stats: %+v", st.All)
	}
	st, _ = CountDeadLetters(ctx, c, "dlq", Filter{}, 2)
	if st.All.Count != 2 || !st.Truncated {
		t.Errorf("limited stats: %+v truncated=%t", st.All, st.Truncated)
	}

	got, err := NewestDeadLetters(ctx, c, "dlq", Filter{Host: "a.example"}, 2)
	if err != nil || len(got) != 2 || got[0].Entry.ID != "4000-0" || got[1].Entry.ID != "3000-0" {
		t.Fatalf("newest two for a.example: %v, %v", ids(got), err)
	}
	got, _ = NewestDeadLetters(ctx, c, "dlq", Filter{Until: ms(2500)}, 10)
	if cmp.Diff([]string{"2000-0", "1000-0"}, ids(got)) != "" {
		t.Errorf("until 2.5 s: %v", ids(got))
	}

	// Trimming removes exactly those older than the bound.
	n, err := TrimDeadLetters(ctx, c, "dlq", ms(3000))
	if err != nil || n != 2 {
		t.Fatalf("trim: %d, %v", n, err)
	}
	if s, _ := ReadStream(ctx, c, "dlq"); s.Length != 4 || s.Oldest != ms(3000).UTC() {
		t.Errorf("after trim: %+v", s)
	}
}

// TestNewestDeadLettersAcrossBatches filters more entries than one batch
// holds.
func TestNewestDeadLettersAcrossBatches(t *testing.T) {
	c := client(t, testenvRedis(t))
	for i := range int64(2*batch + 10) {
		reason := "http_status"
		if i == 3 || i == 7 {
			reason = "rare"
		}
		do(t, c, "XADD", "dlq", strconv.FormatInt(1000+i, 10)+"-0", "dlq_reason", reason)
	}
	got, err := NewestDeadLetters(context.Background(), c, "dlq", Filter{Reason: "rare"}, 5)
	if err != nil || cmp.Diff([]string{"1007-0", "1003-0"}, ids(got)) != "" {
		t.Fatalf("rare ones: %v, %v", ids(got), err)
	}
	st, _ := CountDeadLetters(context.Background(), c, "dlq", Filter{}, 0)
	if st.All.Count != 2*batch+10 || st.Truncated {
		t.Errorf("count over batches: %+v", st.All)
	}
}

func ids(ds []DeadLetter) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Entry.ID)
	}
	return out
}

// xrangeCalls is how many XRANGE commands the server has run.
func xrangeCalls(t *testing.T, c rueidis.Client) int {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_xrange:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// addAll writes entries with the ids given, each with dlq_reason reason,
// in one round trip.
func addAll(t *testing.T, c rueidis.Client, reason string, ids ...string) {
	t.Helper()
	cmds := make(rueidis.Commands, 0, len(ids))
	for _, id := range ids {
		cmds = append(cmds, c.B().Xadd().Key("dlq").Id(id).FieldValue().FieldValue("dlq_reason", reason).Build())
	}
	for _, r := range c.DoMulti(context.Background(), cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNewestDeadLettersReadBackwardsInWindows reads the newest dead
// letters of a stream that has a millisecond holding more than a batch,
// decades without any, and a steady stretch, and checks how many reads it
// took.
func TestNewestDeadLettersReadBackwardsInWindows(t *testing.T) {
	c := client(t, testenvRedis(t))
	ctx := context.Background()
	var add []string
	// In 1996: ten old ones.
	for i := range 10 {
		add = append(add, strconv.Itoa(850000000000+i)+"-0")
	}
	addAll(t, c, "old", add...)
	// One millisecond of 2026 with three batches and more.
	add = add[:0]
	for i := range 3*batch + 7 {
		add = append(add, "1790000000000-"+strconv.Itoa(i))
	}
	addAll(t, c, "dense", add...)
	// Then a steady 5000, one a millisecond.
	add = add[:0]
	for i := range 5000 {
		add = append(add, strconv.Itoa(1790000001000+i)+"-0")
	}
	addAll(t, c, "steady", add...)

	before := xrangeCalls(t, c)
	got, err := NewestDeadLetters(ctx, c, "dlq", Filter{}, 3)
	if err != nil || cmp.Diff([]string{"1790000005999-0", "1790000005998-0", "1790000005997-0"}, ids(got)) != "" {
		t.Fatalf("newest three: %v, %v", ids(got), err)
	}
	if n := xrangeCalls(t, c) - before; n > 2 {
		t.Errorf("the newest three of a steady stretch took %d XRANGE, want at most 2", n)
	}

	before = xrangeCalls(t, c)
	got, err = NewestDeadLetters(ctx, c, "dlq", Filter{Reason: "dense"}, 2*batch+1)
	if err != nil || len(got) != 2*batch+1 || got[0].Entry.ID != "1790000000000-"+strconv.Itoa(3*batch+6) ||
		got[len(got)-1].Entry.ID != "1790000000000-"+strconv.Itoa(batch+6) {
		t.Fatalf("the dense millisecond: %d, %v", len(got), err)
	}
	// 5000 steady entries to pass are ten batches at least; the dense
	// millisecond is four.
	if n := xrangeCalls(t, c) - before; n > 40 {
		t.Errorf("reading back to the dense millisecond took %d XRANGE", n)
	}

	// Across thirty years without an entry.
	before = xrangeCalls(t, c)
	got, err = NewestDeadLetters(ctx, c, "dlq", Filter{Reason: "old"}, 4)
	if err != nil || cmp.Diff([]string{"850000000009-0", "850000000008-0", "850000000007-0", "850000000006-0"}, ids(got)) != "" {
		t.Fatalf("the old ones: %v, %v", ids(got), err)
	}
	if n := xrangeCalls(t, c) - before; n > 50 {
		t.Errorf("crossing thirty years took %d XRANGE", n)
	}

	// Bounds: since and until select a stretch; an until before the
	// first entry, nothing.
	got, _ = NewestDeadLetters(ctx, c, "dlq", Filter{Since: time.UnixMilli(1790000001998), Until: time.UnixMilli(1790000002000)}, 10)
	if cmp.Diff([]string{"1790000002000-0", "1790000001999-0", "1790000001998-0"}, ids(got)) != "" {
		t.Errorf("since and until: %v", ids(got))
	}
	if got, err := NewestDeadLetters(ctx, c, "dlq", Filter{Until: time.UnixMilli(1000)}, 10); err != nil || len(got) != 0 {
		t.Errorf("until before the first: %v, %v", ids(got), err)
	}
	if got, err := NewestDeadLetters(ctx, c, "absent", Filter{}, 10); err != nil || len(got) != 0 {
		t.Errorf("an absent stream: %v, %v", ids(got), err)
	}
}
