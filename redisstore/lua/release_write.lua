-- release_write.lua: drop one or every hold of the writer; on the last one, free the lock (or
-- leave it to the writer's own read lease, after a downgrade) and wake the right waiters.
-- Uses lib.lua. Serves RWMutex writers.
-- KEYS[1]  lock hash (see acquire_read.lua)
-- KEYS[2]  readers, leash_rw_readers:{name}
-- KEYS[3]  waiting writers, leash_rw_writers:{name}
-- KEYS[4]  channel, leash_rw__channel:{name}
-- KEYS[5]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- KEYS[6]  Redisson's RReadWriteLock channel, redisson_rwlock:{name}
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds, re-applied while holds remain (never below a live reader's,
--          see hold_for)
-- ARGV[3]  "one" or "all"
-- ARGV[4]  latch lifetime in milliseconds
-- Returns  1 freed; 0 still held; nil when the owner does not hold the write lock; {-1, what}
--          when KEYS[1] is not a lock (see not_lock), or KEYS[2] or KEYS[3] hold what leash
--          does not write there (see companion): nothing is changed.
-- On the last hold, publishes "w" (wake one writer) if a writer waits, else "r" (wake every
-- reader), and "01" on KEYS[6] for Redisson's waiters, which read it as the "1" (wake all) of
-- its writer's last unlock (see release_read.lua). Touches only KEYS.
local bad = foreign(KEYS[2], 'owners', KEYS[3], 'owners')
if bad then
    return bad
end
local finished, reply = drop_hold(KEYS[1], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if finished then
    if reply == 0 and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
        hold_for(KEYS[1], KEYS[2], ARGV[2], now_ms()) -- holds remain: not below a reader
    end
    local what = reply == nil and not_lock(KEYS[1], 'lock')
    if what then
        return {-1, what}
    end
    return reply
end
local now = now_ms()
if purge_readers(KEYS[2], KEYS[1], now) > 0 then -- downgraded: the writer's read lease remains
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], math.max(1, last_score(KEYS[2]) - now))
else
    redis.call('del', KEYS[1])
end
if purge(KEYS[3], now) > 0 then
    redis.call('publish', KEYS[4], 'w')
else
    redis.call('publish', KEYS[4], 'r')
end
redis.call('publish', KEYS[6], '01')
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
