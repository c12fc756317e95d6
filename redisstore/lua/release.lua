-- release.lua: drop one or every hold of an owner; on the last one, delete the lock and wake
-- the next waiter. Uses lib.lua. Serves Mutex and FairMutex.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson layout)
-- KEYS[2]  release channel, redisson_lock__channel:{name}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- KEYS[4]  fair queue, leash_fair_queue:{name} (see acquire_fair.lua)
-- KEYS[5]  fair places, leash_fair_places:{name}
-- KEYS[6]  fair channel, leash_fair__channel:{name}
-- ARGV[1]  owner field "<client-uuid>:<n>"
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  "one" to drop one hold, "all" to drop every hold of the owner
-- ARGV[4]  latch lifetime in milliseconds: how long a retry of this request may arrive
-- Returns  1 freed; 0 still held, one hold dropped; nil when ARGV[1] holds nothing (the Go
--          side maps this to ErrNotHeld); {-1, what} when KEYS[1] holds something that is
--          not a lock (see not_lock; ErrNotHeld and ErrNotALock), or KEYS[4] or KEYS[5] hold
--          what leash does not write there (see companion): nothing is changed.
-- On the last hold: if FairMutex waiters are queued, the head's owner is published on
-- KEYS[6] (only that waiter wakes); otherwise "0" is published on KEYS[2], as Redisson does,
-- so Java and Go waiters wake. The latch makes the release idempotent: a transport retry of
-- the same request (same request id) gets the first attempt's answer instead of ErrNotHeld
-- or a second decrement; Redisson's unlock uses the same latch (see drop_hold). The fair
-- queue is read only when it exists. Touches only KEYS.
local bad = foreign(KEYS[4], 'owners', KEYS[5], 'owners') -- read after the hold is dropped
if bad then
    return bad
end
local finished, reply = drop_hold(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if finished then
    local what = reply == nil and not_lock(KEYS[1], 'lock')
    if what then
        return {-1, what}
    end
    return reply
end
-- The owner's field was the hash's only one: the hash went with it.
local head = nil
if redis.call('exists', KEYS[4]) == 1 then
    purge_queue(KEYS[4], KEYS[5], now_ms())
    head = redis.call('zrange', KEYS[4], 0, 0)[1]
end
if head then
    redis.call('publish', KEYS[6], head)
else
    redis.call('publish', KEYS[2], '0')
end
redis.call('set', KEYS[3], '1', 'px', ARGV[4])
return 1
