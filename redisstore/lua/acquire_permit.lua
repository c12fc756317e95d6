-- acquire_permit.lua: lease one permit of a semaphore to an owner.
-- Uses lib.lua. Serves Semaphore.
-- KEYS[1]  permits, a zset named exactly as the semaphore: owner -> end of its lease in ms
-- KEYS[2]  fencing counter, redisson_lock_token:{name}
-- KEYS[3]  permit count, leash_semaphore_size:{name} (no TTL: it is configuration)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner (one per permit)
-- ARGV[3]  permit count to set if the semaphore does not exist yet
-- KEYS[4]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[4]  restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--          (see grace_at); a fresh grant inside it is refused with {0, ms left, "grace"}, and one
--          on a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns  {1, token, 1} when granted; {0, ms} when every permit is held: until the first
--          permit's lease ends; {-1, what} when KEYS[1] is not a semaphore (a lock, or a
--          user's zset without the permit count beside it: see not_lock), or when KEYS[2] or
--          KEYS[3] is not a decimal string (see companion): nothing is changed.
-- Expired permits are dropped first: a holder that crashed returns its permit within one
-- lease. Touches only KEYS.
local what = not_lock(KEYS[1], 'semaphore', KEYS[3])
if what then
    return {-1, what}
end
local bad = foreign(KEYS[3], 'counter', KEYS[2], 'counter')
if bad then
    return bad
end
local now = now_ms()
local lease = tonumber(ARGV[1])
local held = purge(KEYS[1], now)
local size = tonumber(redis.call('get', KEYS[3]))
local new = not size -- the count is written with the first grant, never by a refusal
if new then
    size = tonumber(ARGV[3])
end
if redis.call('zscore', KEYS[1], ARGV[2]) then -- a retry of a granted permit
    if new then
        redis.call('set', KEYS[3], size)
    end
    redis.call('zadd', KEYS[1], now + lease, ARGV[2])
    extend(KEYS[1], lease)
    return {1, last_token(KEYS[2]), 1}
end
if held < size then
    local token, refused = fresh_token(KEYS[2], KEYS[4], ARGV[4])
    if not token then
        return refused
    end
    if new then
        redis.call('set', KEYS[3], size)
    end
    redis.call('zadd', KEYS[1], now + lease, ARGV[2])
    extend(KEYS[1], lease)
    return {1, token, 1}
end
return {0, first_score(KEYS[1]) - now}
