-- force.lua: delete a lock whoever holds it and wake its waiters (an operator's tool).
-- KEYS[1]  lock hash
-- KEYS[2]  release channel, redisson_lock__channel:{name}
-- Returns  1 when a lock was deleted (and "0" published on KEYS[2]); 0 when there was none.
-- Same effect as Redisson's RLock.forceUnlock. Touches only KEYS.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], 0)
    return 1
end
return 0
