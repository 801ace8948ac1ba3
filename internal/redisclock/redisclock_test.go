package redisclock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

// TestNowAsARestrictedUser reads the clock as the worker's Redis user,
// which is not granted TIME, and checks Redis logged no denial.
func TestNowAsARestrictedUser(t *testing.T) {
	srv := testenv.StartRedisACL(t, "../../deploy/redis-acl/minimal.acl")
	for _, user := range []string{"replicator", "watcher", "brokeradmin"} {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: user, Password: "PASSWORD",
			ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		now, err := Now(context.Background(), c)
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if d := time.Since(now); d < -time.Minute || d > time.Minute {
			t.Errorf("%s: server time %v is %v from this machine's", user, now, d)
		}
		if denied, err := srv.ACLDenials(user); err != nil || len(denied) != 0 {
			t.Errorf("%s: ACL denials %v, %v", user, denied, err)
		}
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("# Server\r\nredis_version:7.0.15\r\nserver_time_usec:1796536848667147\r\nuptime_in_seconds:0\r\n")
	if err != nil || got != time.UnixMicro(1796536848667147).UTC() {
		t.Errorf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"", "# Server\r\nredis_version:4.0.0\r\n", "server_time_usec:soon\r\n", "server_time_usec:-1\r\n"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) read a clock", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"server_time_usec:1796536848667147\r\n", "server_time_usec:\r\n", "x\r\nserver_time_usec:99999999999999999999\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, info string) {
		if at, err := Parse(info); err == nil && at.Before(time.Unix(0, 0)) {
			t.Fatalf("Parse(%q) = %v, before the epoch", info, at)
		}
	})
}

func ExampleParse() {
	at, _ := Parse("# Server\r\nredis_version:7.0.15\r\nserver_time_usec:1796536848667147\r\n")
	fmt.Println(at.Format(time.RFC3339Nano))
	// Output: 2026-12-06T06:00:48.667147Z
}
