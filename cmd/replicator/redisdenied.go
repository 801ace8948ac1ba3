package main

import (
	"fmt"
	"io"

	"github.com/replicator-go/replicator/internal/redisacl"
)

// redisUser is the Redis user a URL authenticates as: "default" when it
// names none (a password alone authenticates as default).
func redisUser(rawURL string) string {
	t, err := parseRedisURL(rawURL)
	if err != nil || t.opt.Username == "" {
		return "default"
	}
	return t.opt.Username
}

// reportDenied prints, when err holds a command Redis refused under its
// ACL, the one line that names the user, the command, the key and the
// grant that would allow it, and reports whether it did. The operator
// subcommands then exit 1.
func reportDenied(stderr io.Writer, tool, rawURL string, err error) bool {
	msg, ok := redisacl.Message(tool, redisUser(rawURL), err)
	if ok {
		fmt.Fprintln(stderr, msg)
	}
	return ok
}
