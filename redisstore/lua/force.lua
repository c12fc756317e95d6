-- force.lua: delete whatever lock is held on a name, whoever holds it, and wake every waiter
-- (an operator's tool). Uses lib.lua.
-- KEYS[1]  the lock hash or semaphore zset, named as the lock
-- KEYS[2]  fair queue        KEYS[3]  fair places
-- KEYS[4]  readers           KEYS[5]  waiting writers
-- KEYS[6]  redisson_lock__channel:{name}   KEYS[7]  leash_fair__channel:{name}
-- KEYS[8]  leash_rw__channel:{name}        KEYS[9]  leash_semaphore__channel:{name}
-- KEYS[10] semaphore permit count, leash_semaphore_size:{name}
-- Returns  1 when something was deleted (and "1", wake all, published on every channel;
--          Redisson's waiters treat "1" as a wake-all too); 0 when there was nothing;
--          {-1, what} when KEYS[1] holds something that is not a lock (see not_lock):
--          nothing is deleted.
-- A semaphore's permit count is configuration and survives. A companion key (KEYS[2] to
-- KEYS[5]) is deleted only if it has the shape leash writes there (see companion); one that
-- holds a user's data is skipped, the lock still freed. Touches only KEYS.
local what = not_lock(KEYS[1], nil, KEYS[10])
if what then
    return {-1, what}
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
    return 1
end
return 0
