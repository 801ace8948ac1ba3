package sinktest_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// A backend's test runs the whole suite with Run (see the package
// documentation). Its helpers also serve a backend's own tests: Bytes makes
// a small blob a test can name without fixtures, the same on every call,
// and Stream a large one generated as it is read.
func Example() {
	s := memory.New(memory.Options{TTL: sinktest.TTL})
	ctx := context.Background()

	data := sinktest.Bytes(7, 4096)
	small, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(small.Size, small.Fingerprint == sinktest.Fingerprint(data))
	fmt.Println(bytes.Equal(data, sinktest.Bytes(7, 4096)))

	large, err := s.Put(ctx, sinktest.Stream(7, 8<<20), sink.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(large.Size, large.Created)
	// Output:
	// 4096 true
	// true
	// 8388608 true
}
