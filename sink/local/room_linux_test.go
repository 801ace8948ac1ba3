package local

import (
	"syscall"
	"testing"

	"github.com/replicator-go/replicator/sink"
)

// TestFreeSpaceIsStatfs: on Linux the free space Room weighs is the root's
// file system's, as statfs reports it to an unprivileged writer.
func TestFreeSpaceIsStatfs(t *testing.T) {
	dir := t.TempDir()
	got, err := freeSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	// Other processes write meanwhile: within a megabyte is the same.
	if want := int64(st.Bavail) * int64(st.Bsize); got <= 0 || got-want > 1<<20 || want-got > 1<<20 {
		t.Errorf("freeSpace = %d, statfs says %d", got, want)
	}

	// New wires it: a margin larger than any disk leaves no room.
	s, err := New(Options{Dir: dir, MaxTotalBytes: None, MinFreeBytes: 1 << 62, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	room(t, s, 0, sink.ErrNoRoom)
}
