package fetch

import (
	"context"
	_ "embed"

	"github.com/redis/rueidis"
)

// giveBackScript undoes one delivery of each entry it is given. See
// giveback.lua.
//
//go:embed giveback.lua
var giveBackLua string

var giveBackScript = rueidis.NewLuaScript(giveBackLua)

// giveBack undoes the delivery of entries that came back from a handling
// that did not fail on them: a transient outcome, or an entry left pending
// without being handled (its host's backlog or the worker was full). The
// ceiling is on times-delivered (XPENDING), which every read and reclaim
// raises; without this a command retried through a long outage, or
// deferred behind a backlog, would be dead-lettered on its first real
// failure (SPEC 3.5: transient failures never count toward the ceiling).
// A failure costs only an extra count, so it is logged, not fatal.
func (w *Worker) giveBack(ctx context.Context, ids ...string) {
	if len(ids) == 0 {
		return
	}
	for chunk := range chunks(ids, maxClaimIDs) {
		args := append([]string{w.o.Group, w.o.Consumer}, chunk...)
		if err := giveBackScript.Exec(ctx, w.client, []string{w.o.Stream}, args).Error(); err != nil {
			w.brokerFailure("give_back")
			w.log.WarnContext(ctx, "could not give back deliveries; they count toward the ceiling",
				"count", len(chunk), "error", err)
			return
		}
	}
}
