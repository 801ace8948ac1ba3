package local_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "blobs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := local.New(local.Options{
		Dir:    dir,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	b, err := s.Put(context.Background(), strings.NewReader("hello, world\n"), sink.PutOptions{Limit: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, s.Path(b.Fingerprint))
	fmt.Println(b.Fingerprint)
	fmt.Println(b.Size, b.Created)
	fmt.Println(rel)
	fmt.Println(strings.HasPrefix(b.URI, "file:///"))

	// Storing the same bytes again only re-references the blob.
	b, _ = s.Put(context.Background(), strings.NewReader("hello, world\n"), sink.PutOptions{Limit: 1 << 20})
	fmt.Println(b.Created)
	// Output:
	// 853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020
	// 13 true
	// 85/3f/853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020.bin
	// true
	// false
}
