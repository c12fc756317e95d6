-- acquire_write.lua: take the writer lock of a readers-writer lock, or mark a waiting writer.
-- Uses lib.lua. Serves RWMutex.Lock.
-- KEYS[1]  lock hash ("mode" and the writer's "<owner>" -> hold count; see acquire_read.lua)
-- KEYS[2]  fencing counter, redisson_lock_token:{name}
-- KEYS[3]  readers, leash_rw_readers:{name}: zset owner -> lease end in ms
-- KEYS[4]  waiting writers, leash_rw_writers:{name}: zset owner -> mark end in ms
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner
-- ARGV[3]  mark lifetime in ms: a writer that is not granted is marked as waiting until
--          now + ARGV[3], which keeps new readers out; 0 marks nothing (TryLock)
-- KEYS[5]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[4]  restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--          (see grace_at); a fresh grant inside it is refused with {0, ms left, "grace"}, and one
--          on a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns  {1, token, holds} when granted; {0, ms} otherwise: the holder's remaining lease,
--          or until the last reader's lease ends. An owner that holds a read lease gets the
--          error LEASH_UPGRADE: it would wait for itself. {-1, what} when KEYS[1] is not a
--          lock (see not_lock), or KEYS[2] to KEYS[4] hold what leash does not write there
--          (see companion): nothing is changed.
-- Touches only KEYS.
local bad = refusal(KEYS[1], 'lock', KEYS[3], 'owners', KEYS[4], 'owners', KEYS[2], 'counter')
if bad then
    return bad
end
local now = now_ms()
local readers = purge_readers(KEYS[3], KEYS[1], now)
purge(KEYS[4], now)
if redis.call('zscore', KEYS[3], ARGV[2]) then
    return redis.error_reply('LEASH_UPGRADE the owner holds a read lease on this lock')
end
if redis.call('hget', KEYS[1], 'mode') == 'read' and readers == 0 and redis.call('hlen', KEYS[1]) == 1 then
    -- Every leash reader's lease has ended (purge_readers dropped their fields). A field
    -- besides "mode" is a Redisson reader's hold (Redisson's RReadWriteLock keeps its readers
    -- in the hash): the lock is still held.
    redis.call('del', KEYS[1])
end
local token, refused = nil, nil
-- A live reader with no hash is one downgraded from a writer whose shorter lease let the
-- hash expire first (hold_for now keeps the hash as long as its readers; a server may still
-- hold such keys from an earlier leash): the lock is still read-held.
if redis.call('exists', KEYS[1]) == 0 and readers == 0 then
    token, refused = fresh_token(KEYS[2], KEYS[5], ARGV[4])
    if is_stale(refused) then
        return refused -- no waiting writer's mark: the client tries again with a fresh view
    end
    if token then
        redis.call('zrem', KEYS[4], ARGV[2])
        redis.call('hset', KEYS[1], 'mode', 'write')
        return take(KEYS[1], ARGV[2], ARGV[1], token)
    end
end
local held = reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
if held then
    if readers > 0 then
        hold_for(KEYS[1], KEYS[3], ARGV[1], now) -- not below its downgrade's lease
    end
    return held
end
local wait = tonumber(ARGV[3])
if wait > 0 then
    redis.call('zadd', KEYS[4], now + wait, ARGV[2])
    extend(KEYS[4], wait)
end
if refused then
    return refused -- marked as a waiting writer meanwhile
end
local left = redis.call('pttl', KEYS[1])
if readers > 0 then
    left = math.max(left, last_score(KEYS[3]) - now)
end
return {0, left}
