package redisacl

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

// TestCheckOnARealBroker has the production users run what they are not
// granted: a command none of their rules allows, and a command allowed by
// a selector on other keys. Both are NOPERM; the grant names both.
func TestCheckOnARealBroker(t *testing.T) {
	srv := testenv.StartRedisACL(t, "../../deploy/redis-acl/minimal.acl")
	as := func(user string) rueidis.Client { return srv.ClientAs(t, user, "PASSWORD") }
	ctx := context.Background()
	for _, tt := range []struct {
		user, key string
		want      string
	}{
		// watcher has no XTRIM at all.
		{"watcher", "content.fetch.dlq", "replicator dlq: Redis user watcher may not run XTRIM on content.fetch.dlq: grant it with `(+xtrim ~content.fetch.dlq)` (docs/operations.md, Redis ACL)"},
		// brokeradmin has XTRIM on ~*.dlq only.
		{"brokeradmin", "content.fetch", "replicator dlq: Redis user brokeradmin may not run XTRIM on content.fetch: grant it with `(+xtrim ~content.fetch)` (docs/operations.md, Redis ACL)"},
	} {
		c := as(tt.user)
		err := c.Do(ctx, c.B().Xtrim().Key(tt.key).Maxlen().Threshold("0").Build()).Error()
		if !IsNoPerm(err) {
			t.Fatalf("%s XTRIM %s: %v, want NOPERM", tt.user, tt.key, err)
		}
		wrapped := fmt.Errorf("trimming: %w", Check(err, "XTRIM", tt.key))
		if got, ok := Message("replicator dlq", tt.user, wrapped); !ok || got != tt.want {
			t.Errorf("Message = %q, %t\nwant %q", got, ok, tt.want)
		}
		if !IsNoPerm(wrapped) {
			t.Error("the wrapped error is no longer NOPERM")
		}
	}

	// Anything else passes through unchanged.
	c := as("brokeradmin")
	err := c.Do(ctx, c.B().XinfoStream().Key("content.fetch").Build()).Error()
	if err == nil || IsNoPerm(err) || Check(err, "XINFO STREAM", "content.fetch") != err {
		t.Errorf("an absent key's error: %v", err)
	}
	if Check(nil, "XADD", "k") != nil {
		t.Error("Check(nil) is not nil")
	}
	if _, ok := Message("replicator status", "u", errors.New("connection refused")); ok {
		t.Error("a connection error read as a denial")
	}
}

func TestGrant(t *testing.T) {
	for _, tt := range []struct {
		d    Denied
		want string
	}{
		{Denied{Command: "INFO"}, "+info"},
		{Denied{Command: "XINFO STREAM", Key: "content.fetch", Pattern: "content.fetch"}, "(+xinfo|stream ~content.fetch)"},
		{Denied{Command: "HMGET", Key: "replicator:pace:{a.example}", Pattern: "replicator:pace:*"}, "(+hmget ~replicator:pace:*)"},
	} {
		if got := tt.d.Grant(); got != tt.want {
			t.Errorf("%+v: Grant() = %s, want %s", tt.d, got, tt.want)
		}
	}
}

func ExampleMessage() {
	// What a NOPERM from running HMGET on a pacing key becomes, once the
	// code that ran it has wrapped it with CheckPattern.
	err := fmt.Errorf("fleet: %w", &Denied{Command: "HMGET", Key: "replicator:pace:{a.example}", Pattern: "replicator:pace:*",
		Err: errors.New("NOPERM this user has no permissions to run the 'hmget' command")})
	line, _ := Message("replicator status", "brokeradmin", err)
	fmt.Println(line)
	// Output: replicator status: Redis user brokeradmin may not run HMGET on replicator:pace:{a.example}: grant it with `(+hmget ~replicator:pace:*)` (docs/operations.md, Redis ACL)
}
