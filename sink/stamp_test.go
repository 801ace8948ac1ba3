package sink_test

import (
	"testing"

	"github.com/replicator-go/replicator/sink"
)

func TestContentStamp(t *testing.T) {
	const fp = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	m := sink.ContentStamp(fp)
	if len(m) != 1 || m["co-content-sha256"] != fp {
		t.Fatalf("ContentStamp = %v, want only co-content-sha256=%s", m, fp)
	}
	m["other"] = "x"
	if len(sink.ContentStamp(fp)) != 1 {
		t.Error("ContentStamp returned a shared map")
	}
}
