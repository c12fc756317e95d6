-- force.lua: delete whatever is held on a name, whoever holds it, and wake every waiter (an
-- operator's tool).
-- KEYS[1]  the lock hash or semaphore zset, named as the lock
-- KEYS[2]  fair queue        KEYS[3]  fair places
-- KEYS[4]  readers           KEYS[5]  waiting writers
-- KEYS[6]  redisson_lock__channel:{name}   KEYS[7]  leash_fair__channel:{name}
-- KEYS[8]  leash_rw__channel:{name}        KEYS[9]  leash_semaphore__channel:{name}
-- Returns  1 when something was deleted (and "1", wake all, published on every channel;
--          Redisson's waiters treat "1" as a wake-all too); 0 when there was nothing.
-- A semaphore's permit count is configuration and survives. Touches only KEYS.
if redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]) > 0 then
    for i = 6, 9 do
        redis.call('publish', KEYS[i], '1')
    end
    return 1
end
return 0
