package testenv

import (
	"context"
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestRedisStartStopRestart(t *testing.T) {
	r := StartRedis(t)
	if err := Ping(r.Addr); err != nil {
		t.Fatalf("fresh server: %v", err)
	}
	if got, err := r.Do("SET", "k", "v"); err != nil || got != "+OK" {
		t.Fatalf("SET = %q, %v", got, err)
	}
	r.Stop()
	if err := Ping(r.Addr); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if err := r.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if got, err := r.Do("EXISTS", "k"); err != nil || got != ":0" {
		t.Fatalf("after restart EXISTS = %q, %v; want :0 (nothing kept on disk)", got, err)
	}
}

func TestRedisTLS(t *testing.T) {
	r := StartRedisTLS(t, TLSOptions{AuthClients: "yes"})
	if reply, err := r.Do("PING"); err != nil || reply != "+PONG" {
		t.Fatalf("PING over TLS = %q, %v", reply, err)
	}
	if err := Ping(r.Addr); err == nil {
		t.Errorf("a plain PING was answered: the server should speak TLS only")
	}
	if got := r.URL(); got != "rediss://"+r.Addr+"/0" {
		t.Errorf("URL = %q, want rediss://", got)
	}
	// The client certificate is what lets the test's own client in.
	cfg := r.TLS.ClientConfig()
	cfg.Certificates = nil
	conn, err := tls.Dial("tcp", r.Addr, cfg)
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Write([]byte("PING\r\n"))
		if err == nil {
			_, err = conn.Read(make([]byte, 64))
		}
		conn.Close()
	}
	if err == nil {
		t.Errorf("a client without a certificate was answered with --tls-auth-clients yes")
	}
}

func TestRedisACLFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/users.acl"
	if err := os.WriteFile(path, []byte("user worker on >pw ~k* +get +set\nuser default off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := StartRedisACL(t, path)
	if reply, err := r.Do("PING"); err != nil || reply != "+PONG" {
		t.Fatalf("PING as testenv's admin = %q, %v", reply, err)
	}
	if err := Ping(r.Addr); err == nil {
		t.Fatal("an unauthenticated PING was answered: the default user should be off")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, Username: "worker", Password: "pw",
		ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k1").Value("v").Build()).Error(); err != nil {
		t.Fatalf("a granted SET: %v", err)
	}
	if err := c.Do(ctx, c.B().Del().Key("k1").Build()).Error(); err == nil {
		t.Fatal("DEL was allowed")
	}
	got, err := r.ACLDenials("worker")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Reason != "command" || got[0].Object != "del" {
		t.Fatalf("ACL LOG for worker = %v, want one denial of del", got)
	}
	if got, _ := r.ACLDenials(AdminUser); len(got) != 0 {
		t.Errorf("ACL LOG for the admin = %v, want none", got)
	}
}
