-- release_permit.lua: return an owner's permit and wake one waiter.
-- Uses lib.lua. Serves Semaphore.
-- KEYS[1]  permits zset, named as the semaphore: owner -> lease end in ms
-- KEYS[2]  channel, leash_semaphore__channel:{name}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- KEYS[4]  permit count, leash_semaphore_size:{name}
-- ARGV[1]  owner
-- ARGV[2]  latch lifetime in milliseconds
-- Returns  1 released (and "0" published on KEYS[2]); nil when the owner held no live
--          permit (ErrNotHeld); {-1, what} when KEYS[1] is not a semaphore (see not_lock):
--          nothing is changed. Touches only KEYS.
local done = latched(KEYS[3])
if done then
    return done
end
local s = try('zscore', KEYS[1], ARGV[1])
if not s then
    local what = not_lock(KEYS[1], 'semaphore', KEYS[4])
    if what then
        return {-1, what}
    end
    return nil
end
redis.call('zrem', KEYS[1], ARGV[1])
if tonumber(s) <= now_ms() then
    return nil -- its lease had already ended
end
redis.call('publish', KEYS[2], 0)
redis.call('set', KEYS[3], 1, 'px', ARGV[2])
return 1
