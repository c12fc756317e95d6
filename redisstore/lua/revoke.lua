-- revoke.lua: take an exclusive lock from whoever holds it, leaving a tombstone, and tell
-- the holder's client. Uses lib.lua. An operator's tool (leash unlock --force).
-- KEYS[1]  the lock hash, named as the lock
-- KEYS[2]  readers, leash_rw_readers:{name}      KEYS[3]  semaphore permit count
-- ARGV[1]  the revocation channel prefix: the holder's client id is appended
-- ARGV[2]  the lock name as the user named it, for the message
-- Returns  1 when a hold was revoked; 0 when there was none (a free name, or one already
--          revoked); {-2, what} when the name is held by readers or permits, which are not
--          revoked (nothing is changed); {-1, what} when KEYS[1] holds something that is
--          not a lock: nothing is changed.
-- The tombstone is the lock hash itself, its TTL (the holder's remaining lease) unchanged:
-- the owner fields are replaced by "revoked" = the revoked owners, one a line. Every leash
-- script and Redisson's RLock see the key and grant nothing; a Redisson holder's watchdog
-- (HEXISTS, then PEXPIRE) no longer finds its field and stops extending it; a write lock
-- keeps "mode" = "write", which Redisson's read-write lock also respects. The tombstone
-- goes when the last revoked owner acknowledges (ack_revoke.lua) or the TTL runs out.
-- Each revoked owner's client hears "revoked\n<owner>\n<name>" on ARGV[1] .. <client id>.
-- Touches only KEYS (channels are not keys).
local what = not_lock(KEYS[1], nil, KEYS[3])
if what then
    return {-1, what}
end
local typ = redis.call('type', KEYS[1]).ok
if typ == 'zset' then
    return {-2, 'a semaphore'}
end
-- A readers key that holds a user's data holds no readers: it is left alone, as force.lua
-- leaves it. Ended readers' fields go with their leases (a writer's downgrade whose read
-- lease ended is no holder to revoke).
if not companion(KEYS[2], 'owners') and purge_readers(KEYS[2], KEYS[1], now_ms()) > 0 then
    return {-2, 'a read lock'}
end
if typ == 'none' then
    return 0
end
local owners = {}
local f = redis.call('hgetall', KEYS[1])
for i = 1, #f, 2 do
    if f[i] == 'mode' and f[i + 1] == 'read' then
        return {-2, 'a read lock'}
    end
    if f[i] ~= 'mode' and f[i] ~= 'revoked' then
        owners[#owners + 1] = f[i]
    end
end
if #owners == 0 then
    return 0
end
local before = try('hget', KEYS[1], 'revoked')
local list = table.concat(owners, '\n')
if before then
    list = before .. '\n' .. list
end
redis.call('hset', KEYS[1], 'revoked', list) -- first, so that the hash is never empty
redis.call('hdel', KEYS[1], unpack(owners))
for _, o in ipairs(owners) do
    local client = string.match(o, '^[^:]*')
    redis.call('publish', ARGV[1] .. client, 'revoked\n' .. o .. '\n' .. ARGV[2])
end
return 1
