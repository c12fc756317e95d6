-- release_read.lua: end a reader's lease; when the last reader leaves, wake a waiting writer.
-- Uses lib.lua. Serves RWMutex readers.
-- KEYS[1]  lock hash (see acquire_read.lua)
-- KEYS[2]  readers, leash_rw_readers:{name}
-- KEYS[3]  waiting writers, leash_rw_writers:{name}
-- KEYS[4]  channel, leash_rw__channel:{name}
-- KEYS[5]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- KEYS[6]  the reader's timeout key, {name}:<owner>:rwlock_timeout:1 (see acquire_read.lua)
-- KEYS[7]  Redisson's RReadWriteLock channel, redisson_rwlock:{name}
-- ARGV[1]  owner
-- ARGV[2]  latch lifetime in milliseconds
-- Returns  1 when the last reader left; 0 when readers remain; nil when the owner had no
--          live read lease (ErrNotHeld); {-1, what} when KEYS[1] is not a lock (see
--          not_lock): the reader's own lease is dropped, and KEYS[1] left untouched; {-1,
--          what} when KEYS[2] or KEYS[3] hold what leash does not write there (see
--          companion): nothing is changed.
-- Publishes "w" (wake one writer) when the last reader leaves and a writer waits, and "00" on
-- KEYS[7] when that deletes the hash: Redisson's waiters read it as the "0" its last reader
-- publishes (they parse a number), and leash's as leash's own (see echoOne in notify.go), so that Java
-- waiters are woken rather than left to their lease-long sleep. Drops the
-- reader's hold from the hash (its field and timeout key). Never shortens the hash's TTL
-- while others read. Touches only KEYS.
local done = latched(KEYS[5])
if done then
    return done
end
local bad = foreign(KEYS[2], 'owners', KEYS[3], 'owners')
if bad then
    return bad
end
local now = now_ms()
local s = redis.call('zscore', KEYS[2], ARGV[1])
if not s then
    return nil
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('del', KEYS[6])
local what = not_lock(KEYS[1], 'lock')
if not what then
    redis.call('hdel', KEYS[1], ARGV[1])
end
if tonumber(s) <= now then
    return nil -- its lease had already ended
end
if what then
    return {-1, what}
end
local freed = 0
local mode = redis.call('hget', KEYS[1], 'mode')
local left = purge_readers(KEYS[2], KEYS[1], now)
if left == 0 then
    -- A read-mode hash with fields besides "mode" once no leash reader is left is held by
    -- Redisson readers (Redisson's RReadWriteLock keeps its readers in the hash, and the
    -- hash's TTL at their longest lease): it is theirs to end.
    freed = 1
    if mode == 'read' and redis.call('hlen', KEYS[1]) == 1 then
        redis.call('del', KEYS[1])
        redis.call('publish', KEYS[7], '00')
    end
    if purge(KEYS[3], now) > 0 then
        redis.call('publish', KEYS[4], 'w')
    end
elseif mode == 'read' then
    -- Leash readers remain, perhaps Redisson's too: the hash lives at least as long as the
    -- last leash reader's lease, and is never cut below a Redisson reader's (fields cannot
    -- tell whose they are: a reader of an earlier leash has no field), so a reader with a
    -- longer lease that left may keep it up to that lease; a leash writer is not held up by
    -- it (acquire_write.lua deletes a hash whose readers are all gone).
    extend(KEYS[1], math.max(1, last_score(KEYS[2]) - now))
end
redis.call('set', KEYS[5], freed, 'px', ARGV[2])
return freed
