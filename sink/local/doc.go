// Package local is the file:// sink.Sink: blobs live under one directory,
// sharded two levels deep by the first two hex pairs of their sha256,
//
//	file://<abs dir>/<ab>/<cd>/<sha256>.bin
//
// # Writing
//
// Put streams the body into a temp file in the root of the tree
// (".put.<random>.tmp"), hashing on the way and refusing more than the
// limit, then fsyncs it, checks the context one last time and renames it
// to its final name. A blob is therefore only ever seen complete; a failed,
// cancelled or oversized Put removes its temp. If the final name already
// exists the temp is dropped and the existing file's mtime is touched, which
// restarts its retention clock (Created is false).
//
// A touch moves the mtime one second past the store's start and is skipped
// while the mtime is past it, so a hot blob is touched about once a second.
//
// A file keeps no media type: Put takes only the limit and the declared
// size from its options, and the type travels on the blob_available fact
// alone.
//
// Files are made 0644 and directories the sink creates 0755 whatever the
// umask, because another service reads the blobs by their URI. Directories
// that already exist are never re-moded: they belong to whoever made them.
// New warns through the Logger about any level from / down to the root that
// others cannot traverse, since blobs stored under it would be announced but
// unreadable.
//
// # Sweeping
//
// The tree holds three populations. Sweep removes, in this order, *.bin
// files whose mtime is older than TTL, temp files (".*.tmp", at the root or
// in a shard) older than TempGrace, and then shard directories left empty,
// by rmdir only so a directory something was just written into survives.
// Temps get their own, longer grace because a temp is an in-flight write
// until proven otherwise. Run sweeps on an interval.
//
// # Room
//
// The sweep measures the bytes the tree holds (blobs and temps, since a
// crash loop fills the disk with temps too); between sweeps each new blob
// adds its size to that figure. Room (sink.Room) weighs that figure and
// the stores in progress against MaxTotalBytes, and the free space of the
// file system (statfs, on Linux) against MinFreeBytes; the fetcher asks it
// before a fetch's first request. A store given the body's declared length
// (sink.PutOptions.Size) claims it before reading a byte and is
// refused when it does not fit; any store counts the bytes it writes as it
// writes them. So stores that declare their length never pass the ceiling
// together, and one that declares none passes it by at most its own size.
// A store that finds the disk full removes its temp and fails with
// sink.ErrNoRoom beside the system's error. The sweep never reaps a blob
// early to make room. Until the first sweep has measured it, the figure
// counts only this Sink's own new blobs, so a process reopening a tree
// that may already be over the ceiling starts Run and waits on
// WaitMeasured before it stores anything.
//
// # Concurrency
//
// A Sink is safe for concurrent use. Within one process, Puts and the sweep
// serialise on a lock per top-level shard around the publish step, so a
// re-referenced blob is never reaped under its caller and a shard is never
// removed under a rename. Several processes may share a tree: the remaining
// cross-process races end with a retried rename or a blob reported
// Created by two writers, never with a partial blob.
package local
