package testenv

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// TestFakeGCSSemantics pins the emulator behaviour the gcs sink depends
// on, through the real client over HTTP.
func TestFakeGCSSemantics(t *testing.T) {
	g := StartGCS(t, "bkt")
	ctx := context.Background()
	obj := g.Client.Bucket("bkt").Object("blobs/a.bin")
	stamp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	create := func(body string, custom time.Time) error {
		w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		w.ChunkSize = 0 // one multipart request, as the sink sends it
		w.CustomTime = custom
		if _, err := io.Copy(w, strings.NewReader(body)); err != nil {
			return err
		}
		return w.Close()
	}

	t.Run("create if absent", func(t *testing.T) {
		if err := create("first", stamp); err != nil {
			t.Fatalf("create: %v", err)
		}
		err := create("second", stamp.Add(time.Hour))
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != http.StatusPreconditionFailed {
			t.Fatalf("second create = %v, want a 412", err)
		}
		r, err := obj.NewReader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if b, _ := io.ReadAll(r); string(b) != "first" {
			t.Errorf("object holds %q, want the first body kept", b)
		}
	})
	t.Run("customTime on create and patch", func(t *testing.T) {
		attrs, err := obj.Attrs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !attrs.CustomTime.Equal(stamp) {
			t.Errorf("customTime after create = %v, want %v", attrs.CustomTime, stamp)
		}
		later := stamp.Add(24 * time.Hour)
		attrs, err = obj.Update(ctx, storage.ObjectAttrsToUpdate{CustomTime: later})
		if err != nil {
			t.Fatal(err)
		}
		if !attrs.CustomTime.Equal(later) {
			t.Errorf("customTime after patch = %v, want %v", attrs.CustomTime, later)
		}
	})
	t.Run("listing a missing bucket fails", func(t *testing.T) {
		it := g.Client.Bucket("nope").Objects(ctx, &storage.Query{Prefix: "blobs/"})
		if _, err := it.Next(); err == nil || errors.Is(err, iterator.Done) {
			t.Errorf("listing a missing bucket = %v, want an error", err)
		}
	})
	if !strings.HasPrefix(g.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want loopback", g.URL)
	}
}
