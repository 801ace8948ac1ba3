package testenv

import (
	"crypto/tls"
	"testing"
	"time"
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
