package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// On a server started with RedisOptions.ACLFile, testenv's own set-up
// commands (PING, Do, reading the ACL log) run as this user, added to the
// file's users so those stay exactly as written.
const (
	AdminUser     = "testenv-admin"
	AdminPassword = "testenv-admin"
)

// StartRedisACL starts a private redis-server whose users are those of the
// aclfile at path (see RedisOptions.ACLFile), stopped when the test ends.
func StartRedisACL(t testing.TB, path string) *Redis {
	t.Helper()
	r, err := NewRedis(RedisOptions{ACLFile: path})
	if err != nil {
		t.Fatalf("start redis with %s: %v", path, err)
	}
	t.Cleanup(r.Close)
	return r
}

// useACLFile copies the aclfile at path into the server's directory with
// testenv's admin user added, and starts the server on the copy.
func (r *Redis) useACLFile(path string) error {
	users, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("testenv: ACL file: %w", err)
	}
	text := strings.TrimRight(string(users), "\n") + "\n" +
		fmt.Sprintf("user %s on >%s ~* &* +@all\n", AdminUser, AdminPassword)
	copied := filepath.Join(r.dir, "users.acl")
	if err := os.WriteFile(copied, []byte(text), 0o600); err != nil {
		return fmt.Errorf("testenv: ACL file: %w", err)
	}
	r.extra = append(r.extra, "--aclfile", copied)
	r.admin = true
	return nil
}

// URLAs returns a redis:// URL for database 0 of this server that
// authenticates as user.
func (r *Redis) URLAs(user, password string) string {
	return fmt.Sprintf("redis://%s:%s@%s/0", user, password, r.Addr)
}

// AdminURL is URLAs for testenv's admin user: every command allowed.
func (r *Redis) AdminURL() string { return r.URLAs(AdminUser, AdminPassword) }

// ACLDenial is one entry of the server's ACL LOG.
type ACLDenial struct {
	// Reason is "command", "key", "channel" or "auth".
	Reason string
	// Object is the command, key or channel refused.
	Object string
	// Count is how many times it was refused.
	Count int64
}

func (d ACLDenial) String() string { return fmt.Sprintf("%s %s (×%d)", d.Reason, d.Object, d.Count) }

// ACLDenials reads the server's ACL LOG (as testenv's admin on a server
// started with an ACL file, else as the default user) and returns the
// entries of user.
func (r *Redis) ACLDenials(user string) ([]ACLDenial, error) {
	opt := rueidis.ClientOption{InitAddress: []string{r.Addr}, ForceSingleClient: true, DisableCache: true}
	if r.admin {
		opt.Username, opt.Password = AdminUser, AdminPassword
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("testenv: ACL LOG: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := c.Do(ctx, c.B().AclLog().Count(1000).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("testenv: ACL LOG: %w", err)
	}
	var out []ACLDenial
	for _, e := range entries {
		m, err := e.AsMap()
		if err != nil {
			return nil, fmt.Errorf("testenv: ACL LOG entry: %w", err)
		}
		field := func(name string) rueidis.RedisMessage { return m[name] }
		if name, _ := ptr(field("username")).ToString(); name != user {
			continue
		}
		d := ACLDenial{}
		d.Reason, _ = ptr(field("reason")).ToString()
		d.Object, _ = ptr(field("object")).ToString()
		d.Count, _ = ptr(field("count")).AsInt64()
		out = append(out, d)
	}
	return out, nil
}

// authenticate sends AUTH on a fresh connection.
func authenticate(conn net.Conn, user, password string) error {
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "*3\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(user), user, len(password), password); err != nil {
		return err
	}
	line, err := readLine(bufio.NewReader(conn))
	if err != nil {
		return err
	}
	if line != "+OK" {
		return fmt.Errorf("testenv: AUTH as %s: %s", user, line)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// ClientAs connects a client to r as user, closed when the test ends. It
// is a single-node client without client-side caching or CLIENT SETINFO,
// so it sends nothing of its own that a restricted user would be refused.
func (r *Redis) ClientAs(t testing.TB, user, password string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, Username: user, Password: password,
		ForceSingleClient: true, DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		t.Fatalf("redis client as %s: %v", user, err)
	}
	t.Cleanup(c.Close)
	return c
}
