package fetch_test

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/sink"
)

func TestMediaType(t *testing.T) {
	long := strings.Repeat("a", 1100)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "parameters dropped, case folded", in: " Text/HTML ; charset=UTF-8", want: "text/html"},
		{name: "absent", in: "", want: sink.DefaultMediaType},
		{name: "blank", in: "  ", want: sink.DefaultMediaType},
		{name: "parameters only", in: "; charset=utf-8", want: sink.DefaultMediaType},
		// Only the part before ';' matters: long parameters do not hide it.
		{name: "long parameters", in: "text/html; charset=utf-8; x=" + long, want: "text/html"},
		{name: "parameters past any bound", in: "text/html;" + strings.Repeat(long, 10), want: "text/html"},
		{name: "1024-character type", in: "x/" + strings.Repeat("a", 1022), want: "x/" + strings.Repeat("a", 1022)},
		{name: "1025-character type", in: "x/" + strings.Repeat("a", 1023) + "; q=1", want: sink.DefaultMediaType},
		{name: "separators Python strips", in: "\x1ctext/html\x1f;x", want: "text/html"},
		{name: "ISO-8859-1 byte", in: "TEXT/CAF\xc9", want: "text/café"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetch.MediaType(tt.in); got != tt.want {
				t.Errorf("MediaType(%.80q) = %.80q, want %.80q", tt.in, got, tt.want)
			}
		})
	}
}
