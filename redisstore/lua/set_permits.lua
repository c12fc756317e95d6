-- set_permits.lua: change a semaphore's permit count and wake every waiter. Uses lib.lua.
-- KEYS[1]  permit count, leash_semaphore_size:{name}
-- KEYS[2]  channel, leash_semaphore__channel:{name}
-- KEYS[3]  the name's key: must be a semaphore's zset or absent
-- ARGV[1]  the new count
-- Returns  1; {-1, what} when the name holds something that is not a semaphore (a lock, or
--          a user's data: see not_lock), or KEYS[1] holds what is not a permit count (see
--          companion), and nothing is changed. Permits held stay held,
--          even above the new count. Touches only KEYS.
local what = not_lock(KEYS[3], 'semaphore', KEYS[1])
if what then
    return {-1, what}
end
local bad = foreign(KEYS[1], 'counter')
if bad then
    return bad
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], '1')
return 1
