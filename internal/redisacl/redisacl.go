// Package redisacl names the Redis ACL grant a refused command needs.
//
// A broker with one user per service (docs/operations.md, Redis ACL)
// refuses a command or a key outside the user's grants with a NOPERM
// error, which names neither the key nor the grant that would allow it.
// The code that runs a command wraps such an error with Check, which
// records what was run on what; a tool then prints Message: one line
// naming the user, the command, the key and the grant.
package redisacl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Denied is a command Redis refused under its ACL.
type Denied struct {
	// Command is the command as run, in upper case: "XTRIM",
	// "XINFO STREAM".
	Command string
	// Key is the key it ran on; "" for a command that takes none.
	Key string
	// Pattern is the key pattern the grant names: Key itself, unless the
	// command runs on every key of a pattern (replicator:pace:*).
	Pattern string
	// Err is Redis's NOPERM error.
	Err error
}

// Error implements error.
func (d *Denied) Error() string {
	if d.Key == "" {
		return fmt.Sprintf("%s: %v", d.Command, d.Err)
	}
	return fmt.Sprintf("%s %s: %v", d.Command, d.Key, d.Err)
}

// Unwrap returns Redis's error.
func (d *Denied) Unwrap() error { return d.Err }

// Grant is the ACL rule that allows the command: +cmd for a command that
// takes no key, and for one that does the selector (+cmd ~pattern), which
// allows it on those keys and nothing more. A subcommand is named as ACL
// rules name it: XINFO STREAM is +xinfo|stream.
func (d *Denied) Grant() string {
	cmd := "+" + strings.ToLower(strings.Join(strings.Fields(d.Command), "|"))
	if d.Pattern == "" {
		return cmd
	}
	return "(" + cmd + " ~" + d.Pattern + ")"
}

// IsNoPerm reports whether err is Redis's NOPERM error: the ACL refused
// the command or one of its keys.
func IsNoPerm(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM")
}

// Check returns err as a *Denied for command on key when it is NOPERM,
// and err unchanged otherwise (nil included).
func Check(err error, command, key string) error {
	return CheckPattern(err, command, key, key)
}

// CheckPattern is Check for a command run on the keys of pattern, of
// which key is the one refused.
func CheckPattern(err error, command, key, pattern string) error {
	if !IsNoPerm(err) {
		return err
	}
	return &Denied{Command: command, Key: key, Pattern: pattern, Err: err}
}

// Message is the line a tool prints when err holds a *Denied, and whether
// it does:
//
//	<tool>: Redis user <user> may not run <COMMAND> on <key>: grant it with `<grant>` (docs/operations.md, Redis ACL)
//
// user is the one the tool authenticated as ("default" when none).
func Message(tool, user string, err error) (string, bool) {
	var d *Denied
	if !errors.As(err, &d) {
		return "", false
	}
	return tool + ": " + Sentence(user, d), true
}

// Sentence is Message without the tool's name, for a report that shows a
// denial among what it could read.
func Sentence(user string, d *Denied) string {
	if user == "" {
		user = "default"
	}
	on := ""
	if d.Key != "" {
		on = " on " + d.Key
	}
	return fmt.Sprintf("Redis user %s may not run %s%s: grant it with `%s` (docs/operations.md, Redis ACL)", user, d.Command, on, d.Grant())
}
