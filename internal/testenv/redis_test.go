package testenv

import "testing"

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
