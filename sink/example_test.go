package sink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// Any backend will do; the memory one needs no setup.
func Example() {
	var s sink.Sink = memory.New(memory.Options{})
	ctx := context.Background()

	b, err := s.Put(ctx, strings.NewReader("hello, world\n"), sink.PutOptions{Limit: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.URI, b.Size, b.Created)

	rc, err := s.Open(ctx, b.Fingerprint)
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	body, _ := io.ReadAll(rc)
	fmt.Printf("%q\n", body)

	_, err = s.Put(ctx, strings.NewReader("more than eight bytes"), sink.PutOptions{Limit: 8})
	fmt.Println(errors.Is(err, sink.ErrTooLarge))
	// Output:
	// mem://853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020 13 true
	// "hello, world\n"
	// true
}
