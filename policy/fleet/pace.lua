-- One pacing decision for one host, atomic on the server.
--
-- KEYS[1]  the host's hash: last (µs), esc (µs), esc_at (µs), lease (µs)
-- ARGV[1]  "reserve", "refuse" or "sent"
-- ARGV[2]  the host's floor
-- ARGV[3]  reserve: the caller's maxWait; refuse: the Retry-After delay (0 if none)
-- ARGV[4]  escalation first step   ARGV[5] escalation headroom above the floor
-- ARGV[6]  quiet window before the escalation resets   ARGV[7] key grace
-- ARGV[8]  how long a granted request may go without reporting its departure
-- ARGV[9]  the least wait reported while one has yet to report
-- Every duration and instant is in microseconds. Instants come from the
-- server's TIME so workers on different machines agree.
--
-- Reply: {ok, wait, interval in force, escalation, age of the escalation,
-- the server's now}.

if redis.replicate_commands then redis.replicate_commands() end

local function int(x) return string.format('%.0f', x) end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = ARGV[1]
local floor = tonumber(ARGV[2])
local arg = tonumber(ARGV[3])
local first = tonumber(ARGV[4])
local headroom = tonumber(ARGV[5])
local reset = tonumber(ARGV[6])
local grace = tonumber(ARGV[7])
local leasefor = tonumber(ARGV[8])
local poll = tonumber(ARGV[9])

local h = redis.call('HMGET', KEYS[1], 'last', 'esc', 'esc_at', 'lease')
local last = tonumber(h[1])
local esc = tonumber(h[2]) or 0
local esc_at = tonumber(h[3]) or 0
local lease = tonumber(h[4])
-- The quiet window since the last refusal has passed: back to the floor in one step.
if esc > 0 and now - esc_at >= reset then esc = 0 end
local interval = math.max(floor, esc)

-- Keep the key while it can still change a decision, never less.
local function expire(at, iv)
  local keep = at + iv
  if esc > 0 then keep = math.max(keep, esc_at + reset) end
  if lease ~= nil then keep = math.max(keep, lease) end
  redis.call('PEXPIRE', KEYS[1], int(math.ceil((keep - now + grace) / 1000)))
end

if mode == 'refuse' then
  -- Double the interval in force (at least the first step), raise to what
  -- Retry-After asked, cap at the headroom above the floor.
  esc = math.min(math.max(interval * 2, first, arg), floor + headroom)
  esc_at = now
  if last == nil then last = now end
  interval = math.max(floor, esc)
  redis.call('HSET', KEYS[1], 'last', int(last), 'esc', int(esc), 'esc_at', int(esc_at))
  expire(last, interval)
  return {1, 0, interval, esc, 0, now}
end

if mode == 'sent' then
  -- A request left (or was abandoned) now: space the next one from here if
  -- that is later than its reservation, and release its lease.
  if last == nil or now > last then last = now end
  lease = nil
  redis.call('HSET', KEYS[1], 'last', int(last))
  redis.call('HDEL', KEYS[1], 'lease')
  expire(last, interval)
  return {1, 0, interval, esc, now - esc_at, now}
end

if lease ~= nil then
  if now < lease then
    -- A granted request has not left yet: the next one goes a full interval
    -- after it does, which is no earlier than a full interval after its slot.
    local wait = math.max((last or now) + interval - now, math.min(interval, poll))
    return {0, wait, interval, esc, now - esc_at, now}
  end
  -- Its holder never reported: count the request as leaving when the lease ran out.
  if last == nil or lease > last then last = lease end
  lease = nil
  redis.call('HSET', KEYS[1], 'last', int(last))
  redis.call('HDEL', KEYS[1], 'lease')
end

local wait = 0
if last ~= nil and interval > 0 then wait = math.max(0, interval - (now - last)) end
if wait > arg then
  -- Parked: nothing recorded, the slot stays free for a request that goes out.
  return {0, wait, interval, esc, now - esc_at, now}
end
if interval <= 0 then
  -- Nothing to space: a host with no floor and no escalation costs no write.
  return {1, 0, interval, esc, now - esc_at, now}
end
last = now + wait
lease = last + leasefor
if esc > 0 then
  redis.call('HSET', KEYS[1], 'last', int(last), 'lease', int(lease), 'esc', int(esc), 'esc_at', int(esc_at))
else
  redis.call('HSET', KEYS[1], 'last', int(last), 'lease', int(lease))
  redis.call('HDEL', KEYS[1], 'esc', 'esc_at')
end
expire(last, interval)
return {1, wait, interval, esc, now - esc_at, now}
