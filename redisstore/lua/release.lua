-- release.lua: drop one or every hold of an owner; on the last one, delete the lock and wake a waiter.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson layout)
-- KEYS[2]  release channel, redisson_lock__channel:{name}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- ARGV[1]  owner field "<client-uuid>:<n>"
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  "one" to drop one hold, "all" to drop every hold of the owner
-- ARGV[4]  latch lifetime in milliseconds: how long a retry of this request may arrive
-- Returns  1 freed (and "0" published on KEYS[2]); 0 still held, one hold dropped;
--          nil when ARGV[1] holds nothing (the Go side maps this to ErrNotHeld).
-- The latch makes the release idempotent: a transport retry of the same request (same
-- request id) gets the first attempt's answer instead of ErrNotHeld or a second decrement.
-- Redisson's unlock uses the same latch and publishes the same "0", so Java waiters wake.
-- Touches only KEYS, so it is safe on Cluster and proxies.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
if ARGV[3] == 'one' then
    local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
    if holds > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        redis.call('set', KEYS[3], 0, 'px', ARGV[4])
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], 0)
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
