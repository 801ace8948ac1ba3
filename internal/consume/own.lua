-- Confirms that this consumer still owns entries and renews its claim on
-- them in one step, so no other consumer can take one in between
-- (docs/streams.md, Holding commands and Ownership at the fate).
--
-- KEYS[1] the command stream; ARGV[1] the group; ARGV[2] this consumer;
-- ARGV[3..] entry ids. Returns one integer per id:
--   1  pending for this consumer: its idle time is reset to 0 (XCLAIM …
--      JUSTID counts no delivery), so a reclaim elsewhere cannot take it
--      for the claim's minimum idle time;
--   0  not pending for this consumer: another consumer took it, or it was
--      acked;
--  -1  was pending for this consumer but is trimmed from the stream: the
--      claim has dropped it from the pending list.
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local state = 0
  if redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])[1] then
    state = -1
    if #redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'JUSTID') > 0 then
      state = 1
    end
  end
  out[#out + 1] = state
end
return out
