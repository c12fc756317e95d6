-- ack_revoke.lua: a revoked owner acknowledges that it was told; the last acknowledgement
-- deletes the tombstone and wakes every waiter. Uses lib.lua.
-- KEYS[1]  the lock hash (the tombstone, see revoke.lua)
-- KEYS[2]  redisson_lock__channel:{name}   KEYS[3]  leash_fair__channel:{name}
-- KEYS[4]  leash_rw__channel:{name}        KEYS[5]  redisson_rwlock:{name}
-- ARGV[1]  the revoked owner
-- Returns  1 when the tombstone was deleted; 0 otherwise (no tombstone, or one that does not
--          name ARGV[1], or names others still). A hash that holds anything but the tombstone
--          (a Redisson reader that entered it) keeps that: only the field goes. "1", wake
--          all, is published as force.lua does. Touches only KEYS.
local r = try('hget', KEYS[1], 'revoked')
if not r or not_lock(KEYS[1], 'lock') then
    return 0
end
local left, found = {}, false
for o in string.gmatch(r, '[^\n]+') do
    if o == ARGV[1] then
        found = true
    else
        left[#left + 1] = o
    end
end
if not found then
    return 0
end
if #left > 0 then
    redis.call('hset', KEYS[1], 'revoked', table.concat(left, '\n'))
    return 0
end
local n = redis.call('hlen', KEYS[1])
local mode = redis.call('hexists', KEYS[1], 'mode')
if n - 1 - mode > 0 then
    redis.call('hdel', KEYS[1], 'revoked')
    return 0
end
redis.call('del', KEYS[1])
for i = 2, 4 do
    redis.call('publish', KEYS[i], '1')
end
redis.call('publish', KEYS[5], '01') -- Redisson's "1" (see release_write.lua)
return 1
