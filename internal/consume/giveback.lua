-- Gives back the deliveries of entries this consumer received but did not
-- fail on (a transient outcome, or left pending unhandled), so that only
-- failed handlings count toward the delivery ceiling (docs/streams.md, Fates).
--
-- KEYS[1] the command stream; ARGV[1] the group; ARGV[2] this consumer;
-- ARGV[3..] entry ids. An entry still pending for this consumer gets one
-- delivery fewer (never below 0) and keeps its idle time, so it returns
-- through the reclaim exactly when it would have. An entry trimmed from the
-- stream is left as it is: XCLAIM would drop it from the pending list
-- silently, and the reclaim reports it. Returns how many entries were given
-- back.
local given = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])
  local e = pending[1]
  if e and tonumber(e[4]) > 0 and #redis.call('XRANGE', KEYS[1], id, id) > 0 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id,
      'IDLE', e[3], 'RETRYCOUNT', tonumber(e[4]) - 1, 'JUSTID')
    given = given + 1
  end
end
return given
