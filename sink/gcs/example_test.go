package gcs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// In production the client is storage.NewClient(ctx), authenticated by
// Application Default Credentials, and the bucket has a lifecycle rule
// deleting objects some days after their customTime (at least the TTL).
// Here a fake GCS server on loopback stands in for the real service.
func Example() {
	fake, err := testenv.NewGCS("example-blobs")
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	ctx := context.Background()

	// New lists one object to prove the bucket usable before any fetch.
	s, err := gcs.New(ctx, fake.Client, gcs.Options{Bucket: "example-blobs", TTL: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	b, err := s.Put(ctx, strings.NewReader("hello, world\n"), sink.PutOptions{Limit: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.URI)
	fmt.Println(b.Size, b.Created)

	// The same bytes again: no upload, the object's customTime is re-stamped.
	again, err := s.Put(ctx, strings.NewReader("hello, world\n"), sink.PutOptions{Limit: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.URI == b.URI, again.Created)

	_, err = gcs.New(ctx, fake.Client, gcs.Options{Bucket: "no-such-bucket"})
	fmt.Println(errors.Is(err, gcs.ErrBucket))
	// Output:
	// gs://example-blobs/blobs/853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020.bin
	// 13 true
	// true false
	// true
}
