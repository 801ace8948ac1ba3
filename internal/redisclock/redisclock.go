// Package redisclock reads a Redis server's clock. Stream ids and the
// fleet pacer's stamps are on the server's clock, so ages are measured
// against it rather than this machine's. It is read from INFO server
// (server_time_usec), which every user of the broker is granted, where
// TIME is not (docs/operations.md, Redis ACL).
package redisclock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
)

// Now returns the clock of the server c sends INFO to (on a Cluster, any
// one of its nodes).
func Now(ctx context.Context, c rueidis.Client) (time.Time, error) {
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return time.Time{}, fmt.Errorf("redisclock: INFO server: %w", redisacl.Check(err, "INFO", ""))
	}
	return Parse(info)
}

// errNoClock reports an INFO answer without server_time_usec (a server
// older than Redis 5).
var errNoClock = errors.New("redisclock: INFO server has no server_time_usec")

// Parse reads server_time_usec from the text of INFO server.
func Parse(info string) (time.Time, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "server_time_usec:")
		if !ok {
			continue
		}
		usec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || usec < 0 {
			return time.Time{}, fmt.Errorf("redisclock: INFO server answered server_time_usec:%q", v)
		}
		return time.UnixMicro(usec).UTC(), nil
	}
	return time.Time{}, errNoClock
}
