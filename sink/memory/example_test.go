package memory_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// A re-referenced blob restarts its retention clock; Sweep reaps only what
// nobody stored again within the TTL. The explicit-time twins make the
// clock part of the example.
func Example_ttl() {
	s := memory.New(memory.Options{TTL: time.Hour})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

	first, err := s.PutAt(ctx, t0, strings.NewReader("feed v1"), sink.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	again, err := s.PutAt(ctx, t0.Add(30*time.Minute), strings.NewReader("feed v1"), sink.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Created, first.ExpiresAt.Format(time.Kitchen))
	fmt.Println(again.Created, again.ExpiresAt.Format(time.Kitchen))

	fmt.Println("reaped at 1:20PM:", s.SweepAt(t0.Add(80*time.Minute)))
	fmt.Println("reaped at 1:31PM:", s.SweepAt(t0.Add(91*time.Minute)), "left:", s.Len())
	// Output:
	// true 1:00PM
	// false 1:30PM
	// reaped at 1:20PM: 0
	// reaped at 1:31PM: 1 left: 0
}
