-- set_permits.lua: change a semaphore's permit count and wake every waiter.
-- KEYS[1]  permit count, leash_semaphore_size:{name}
-- KEYS[2]  channel, leash_semaphore__channel:{name}
-- KEYS[3]  the name's key: must be a semaphore's zset or absent
-- ARGV[1]  the new count
-- Returns  1; an error when the name is a lock. Permits held stay held, even above the new
--          count. Touches only KEYS.
local typ = redis.call('type', KEYS[3]).ok
if typ ~= 'zset' and typ ~= 'none' then
    return redis.error_reply('WRONGTYPE the name is a lock, not a semaphore')
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], '1')
return 1
