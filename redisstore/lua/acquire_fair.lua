-- acquire_fair.lua: take a lock in arrival order, or take/refresh a place in its queue.
-- Uses lib.lua. Serves FairMutex.
-- KEYS[1]  lock hash (the Mutex layout: a FairMutex and a Mutex on one name are one lock)
-- KEYS[2]  fencing counter, redisson_lock_token:{name}
-- KEYS[3]  queue, leash_fair_queue:{name}: zset owner -> arrival time in microseconds
-- KEYS[4]  places, leash_fair_places:{name}: zset owner -> deadline of the place in ms
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  place lifetime in ms: a caller that is not granted keeps (or takes) a place
--          until now + ARGV[3]; 0 takes no place (TryLock)
-- KEYS[5]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[4]  restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--          (see grace_at); a fresh grant inside it is refused with {0, ms left, "grace"}, and one
--          on a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns  {1, token, holds} when granted (a lock a release handed to the caller, see
--          release.lua, is picked up: the same token, no second hold); {0, ms} otherwise: the holder's remaining lease,
--          or, when the lock is free but another waiter is first, the head's place lifetime;
--          {-1, what} when KEYS[1] is not a lock (see not_lock), or a companion key holds
--          what leash does not write there (see companion): nothing is changed.
-- The lock is granted only when it is free and the caller is first in the queue (or the
-- queue is empty). Places whose deadline passed (dead or departed waiters) are dropped
-- first, so a dead waiter blocks the queue for at most one place lifetime. Deadlines use
-- the server's clock. When the lock is free and nobody queues, it is granted at once, as a
-- Mutex would be. Touches only KEYS.
local fresh = redis.call('exists', KEYS[1], KEYS[3]) == 0
local r
if fresh then
    r = fresh_grant(KEYS[1], KEYS[2], KEYS[5], ARGV[4], ARGV[2], ARGV[1])
    if r[1] ~= 0 or is_stale(r) then
        return r
    end
end
-- (lib.lua: the functions only the rest calls are defined here, see withLibSource)
local wait = tonumber(ARGV[3])

-- take_place takes or refreshes the caller's place, if it waits: arrival order in the
-- queue, a deadline in the places.
local function take_place(now)
    if wait <= 0 then
        return
    end
    if redis.call('zscore', KEYS[3], ARGV[2]) == false then
        local _, arrival = now_us()
        redis.call('zadd', KEYS[3], arrival, ARGV[2])
    end
    redis.call('zadd', KEYS[4], string.format('%d', now + wait), ARGV[2])
    extend(KEYS[3], ARGV[3])
    extend(KEYS[4], ARGV[3])
end

if fresh then
    -- Refused in the restart grace: wait in line meanwhile.
    local bad = foreign(KEYS[4], 'owners')
    if bad then
        return bad
    end
    take_place(now_ms())
    return r
end
local bad = refusal(KEYS[1], 'lock', KEYS[3], 'owners', KEYS[4], 'owners', KEYS[2], 'counter')
if bad then
    return bad
end
local now = now_ms()
purge_queue(KEYS[3], KEYS[4], now)
local free = redis.call('exists', KEYS[1]) == 0
local refused = nil
if free then
    local head = redis.call('zrange', KEYS[3], '0', '0')[1]
    if head == nil or head == ARGV[2] then
        local token
        token, refused = fresh_token(KEYS[2], KEYS[5], ARGV[4])
        if is_stale(refused) then
            return refused -- no place taken: the client tries again with a fresh view
        end
        if token then
            redis.call('zrem', KEYS[3], ARGV[2])
            redis.call('zrem', KEYS[4], ARGV[2])
            return take(KEYS[1], ARGV[2], ARGV[1], token)
        end
    end
else
    local held = reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1], KEYS[3], KEYS[4])
    if held then
        return held
    end
end
take_place(now)
if refused then
    return refused -- the caller keeps (or takes) its place meanwhile
end
if free then
    local head = redis.call('zrange', KEYS[3], '0', '0')[1]
    return {0, tonumber(redis.call('zscore', KEYS[4], head)) - now}
end
return {0, redis.call('pttl', KEYS[1])}
