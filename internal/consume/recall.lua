-- Takes back entries this consumer left pending without handling them (a
-- full host backlog, a full worker), so they return as soon as there is
-- room instead of through the reclaim (docs/streams.md, Holding commands).
--
-- KEYS[1] the command stream; ARGV[1] the group; ARGV[2] this consumer;
-- ARGV[3..] entry ids. An entry still pending for this consumer is claimed
-- again (one more delivery, its idle time reset) and returned with its
-- fields; one pending here but trimmed from the stream is named instead;
-- one no longer pending here (acked, or taken over by another consumer)
-- is left alone. The check and the claim are one step, so an entry another
-- consumer took is never taken from it. Returns {entries, trimmed}.
local entries, trimmed = {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if #redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2]) > 0 then
    if #redis.call('XRANGE', KEYS[1], id, id) == 0 then
      trimmed[#trimmed + 1] = id
    else
      entries[#entries + 1] = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id)[1]
    end
  end
end
return {entries, trimmed}
