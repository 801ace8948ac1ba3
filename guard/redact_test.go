package guard_test

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/guard"
)

func TestRedactURL(t *testing.T) {
	cases := []struct{ raw, want string }{
		{"https://origin.example/a?b=c", "https://origin.example/a?b=c"},
		{"https://user:secret@origin.example/a", "https://xxxxx@origin.example/a"},
		{"https://ghp_TOKEN@origin.example/a", "https://xxxxx@origin.example/a"},
		{"https://user:@origin.example/", "https://xxxxx@origin.example/"},
		{"redis://:pw@127.0.0.1:6380/0", "redis://xxxxx@127.0.0.1:6380/0"},
		// Does not parse (a space in the host, a bad escape): the userinfo
		// goes all the same.
		{"http://user:s3cret@bad host/", "http://xxxxx@bad host/"},
		{"http://user:s3cret@host/%zz", "http://xxxxx@host/%zz"},
		{"user:s3cret@%zz", "user:xxxxx@%zz"},
		{"user:s3cret@origin.example/a", "user:xxxxx@origin.example/a"},
		{"https://origin.example/a@b", "https://origin.example/a@b"},
		{"%zz no at sign", "%zz no at sign"},
		{"", ""},
	}
	for _, c := range cases {
		if got := guard.RedactURL(c.raw); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func FuzzRedactURL(f *testing.F) {
	f.Add("user", "origin.example/a")
	f.Add("user", "bad host/")
	f.Add("us%zz", "host/a@b")
	f.Fuzz(func(t *testing.T, name, rest string) {
		// Whatever follows, text between "://" and an '@' that no '/', '?'
		// or '#' precedes is userinfo and must not be shown.
		const secret = "S3CRET-value"
		if strings.ContainsAny(name, "/?#@") {
			return
		}
		in := "http://" + name + ":" + secret + "@" + rest
		if got := guard.RedactURL(in); strings.Contains(got, secret) {
			t.Fatalf("RedactURL(%q) = %q keeps the password", in, got)
		}
		// Text with no '@' holds no userinfo: it is shown as it is.
		for _, plain := range []string{name + rest, "http://" + name + "/" + rest} {
			if !strings.Contains(plain, "@") {
				if got := guard.RedactURL(plain); got != plain {
					t.Fatalf("RedactURL(%q) = %q, want it unchanged", plain, got)
				}
			}
		}
	})
}
