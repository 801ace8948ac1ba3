package main

import (
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "no arguments", args: nil, wantCode: 2, wantErr: "Subcommands:"},
		{name: "help", args: []string{"--help"}, wantCode: 0, wantErr: "seed"},
		{name: "unknown subcommand", args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown subcommand "frobnicate"`},
		{name: "fetch --help", args: []string{"fetch", "--help"}, wantCode: 0, wantErr: "Usage: replicator fetch"},
		{name: "worker --help", args: []string{"worker", "--help"}, wantCode: 0, wantErr: "REPLICATOR_READ_BLOCK_MS"},
		{name: "seed --help", args: []string{"seed", "--help"}, wantCode: 0, wantErr: "--watch"},
		{name: "dlq --help", args: []string{"dlq", "--help"}, wantCode: 0, wantErr: "--count"},
		{name: "policy --help", args: []string{"policy", "--help"}, wantCode: 0, wantErr: "revoke HOST"},
		{name: "fetch bad flag", args: []string{"fetch", "--nope", "http://x/"}, wantCode: 2, wantErr: "flag provided but not defined"},
		{name: "worker bad flag", args: []string{"worker", "--nope"}, wantCode: 2, wantErr: "flag provided but not defined"},
		{name: "worker argument", args: []string{"worker", "extra"}, wantCode: 2, wantErr: "takes no arguments"},
		{name: "seed without URLs", args: []string{"seed", "--info-source-id", "x"}, wantCode: 2, wantErr: "want at least one URL"},
		{name: "seed without info source", args: []string{"seed", "http://example.com/"}, wantCode: 2, wantErr: "--info-source-id is required"},
		{name: "seed bad watch timeout", args: []string{"seed", "--info-source-id", "x", "--watch-timeout", "soon", "http://example.com/"}, wantCode: 2, wantErr: "watch-timeout"},
		{name: "seed timeout over the ceiling", args: []string{"seed", "--info-source-id", "x", "--timeout", "500", "http://example.com/"}, wantCode: 2, wantErr: "--timeout"},
		{name: "dlq bad count", args: []string{"dlq", "--count", "0"}, wantCode: 2, wantErr: "--count must be positive"},
		{name: "dlq argument", args: []string{"dlq", "extra"}, wantCode: 2, wantErr: "unexpected argument"},
		{name: "dlq trim without --older-than", args: []string{"dlq", "trim"}, wantCode: 2, wantErr: "trim needs --older-than"},
		{name: "dlq trim with a filter", args: []string{"dlq", "trim", "--older-than", "1h", "--reason", "x"}, wantCode: 2, wantErr: "by age alone"},
		{name: "dlq --older-than without trim", args: []string{"dlq", "--older-than", "1h"}, wantCode: 2, wantErr: "trim only"},
		{name: "dlq bad since", args: []string{"dlq", "--since", "yesterday"}, wantCode: 2, wantErr: "--since"},
		{name: "dlq host on replicate", args: []string{"dlq", "--replicate", "--host", "a.example"}, wantCode: 2, wantErr: "--host"},
		{name: "status --help", args: []string{"status", "--help"}, wantCode: 0, wantErr: "--watch"},
		{name: "status argument", args: []string{"status", "extra"}, wantCode: 2, wantErr: "unexpected argument"},
		{name: "policy without action", args: []string{"policy"}, wantCode: 2, wantErr: "want set HOST SECONDS or revoke HOST"},
		{name: "policy unknown action", args: []string{"policy", "drop", "example.com"}, wantCode: 2, wantErr: `unknown action "drop"`},
		{name: "policy set without seconds", args: []string{"policy", "set", "example.com"}, wantCode: 2, wantErr: "want HOST SECONDS"},
		{name: "policy set negative", args: []string{"policy", "set", "example.com", "--", "-1"}, wantCode: 2, wantErr: "want a finite number >= 0"},
		{name: "policy set NaN", args: []string{"policy", "set", "example.com", "NaN"}, wantCode: 2, wantErr: "want a finite number >= 0"},
		{name: "policy set with port", args: []string{"policy", "set", "example.com:8080", "1"}, wantCode: 2, wantErr: "without a port"},
		{name: "policy set URL", args: []string{"policy", "set", "https://example.com/", "1"}, wantCode: 2, wantErr: "without a port or scheme"},
		{name: "policy set host with no ASCII form", args: []string{"policy", "set", "bücher-.test", "1"}, wantCode: 2, wantErr: "not a host name"},
		{name: "policy revoke extra", args: []string{"policy", "revoke", "a.example", "b.example"}, wantCode: 2, wantErr: "revoke: want HOST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinary(t, nil, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantErr, r.stderr)
			}
		})
	}
}
