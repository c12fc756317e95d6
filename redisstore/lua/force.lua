-- force.lua: delete whatever lock is held on a name, whoever holds it, and wake every waiter
-- (an operator's tool). Uses lib.lua.
-- KEYS[1]  the lock hash or semaphore zset, named as the lock
-- KEYS[2]  fair queue        KEYS[3]  fair places
-- KEYS[4]  readers           KEYS[5]  waiting writers
-- KEYS[6]  redisson_lock__channel:{name}   KEYS[7]  leash_fair__channel:{name}
-- KEYS[8]  leash_rw__channel:{name}        KEYS[9]  leash_semaphore__channel:{name}
-- KEYS[10] semaphore permit count, leash_semaphore_size:{name}
-- KEYS[11] redisson_rwlock:{name}, Redisson's RReadWriteLock channel
-- ARGV[1]  the revocation channel prefix (see revoke.lua)   ARGV[2]  the lock name
-- Returns  1 when something was deleted (and "1", wake all, published on every channel;
--          Redisson's waiters treat "1" as a wake-all too); 0 when there was nothing;
--          {-1, what} when KEYS[1] holds something that is not a lock (see not_lock):
--          nothing is deleted.
-- A semaphore's permit count is configuration and survives. A companion key (KEYS[2] to
-- KEYS[5]) is deleted only if it has the shape leash writes there (see companion); one that
-- holds a user's data is skipped, the lock still freed. Each holder deleted (an owner, a
-- reader, a permit; a tombstone's revoked owners are told already) hears
-- "freed\n<owner>\n<name>" on ARGV[1] .. <its client id>, so that it learns at once that
-- it holds nothing. Touches only KEYS (channels are not keys).
local what = not_lock(KEYS[1], nil, KEYS[10])
if what then
    return {-1, what}
end
local holders = {}
local typ = redis.call('type', KEYS[1]).ok
if typ == 'hash' then
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        if f ~= 'mode' and f ~= 'revoked' then
            holders[#holders + 1] = f
        end
    end
elseif typ == 'zset' then
    holders = redis.call('zrange', KEYS[1], 0, -1)
end
if not companion(KEYS[4], 'owners') then
    local seen = {}
    for _, o in ipairs(holders) do
        seen[o] = true
    end
    for _, o in ipairs(redis.call('zrangebyscore', KEYS[4], now_ms(), '+inf')) do
        if not seen[o] then -- a leash reader's field is in the hash too (acquire_read.lua)
            holders[#holders + 1] = o
        end
    end
end
local deleted = redis.call('del', KEYS[1])
for i = 2, 5 do
    if not companion(KEYS[i], 'owners') then
        deleted = deleted + redis.call('del', KEYS[i])
    end
end
if deleted > 0 then
    for i = 6, 9 do
        redis.call('publish', KEYS[i], '1')
    end
    redis.call('publish', KEYS[11], '01') -- Redisson's "1" (see release_write.lua)
    for _, o in ipairs(holders) do
        redis.call('publish', ARGV[1] .. string.match(o, '^[^:]*'), 'freed\n' .. o .. '\n' .. ARGV[2])
    end
    return 1
end
return 0
