-- acquire.lua: take a reentrant lock for an owner, or report the holder's remaining lease.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson RLock layout:
--          field "<client-uuid>:<n>" -> hold count, key TTL = lease)
-- KEYS[2]  fencing counter, redisson_lock_token:{name} (Redisson RFencedLock layout)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<n>"
-- Returns  {1, token, holds} when the owner now holds the lock;
--          {0, pttl} when another owner holds it (pttl in ms, -1 for no expiry).
-- A fresh grant's token is max(counter + 1, server time in microseconds), so tokens keep
-- growing even when the counter is lost (a restart without persistence, a failover to a
-- lagging replica), as long as the server clock does not step back past the lost counter.
-- A re-entry keeps the tenure's token and does not touch the counter. Redisson's RLock
-- takes the lock only when the key is absent or holds its own field, so Java and Go
-- clients exclude each other; Redisson's RFencedLock INCRs the same counter.
-- Touches only KEYS, so it is safe on Cluster and proxies.
redis.replicate_commands()
if redis.call('exists', KEYS[1]) == 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call('get', KEYS[2])) or 0
    local token = math.max(last + 1, now)
    redis.call('set', KEYS[2], string.format('%.0f', token))
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token, 1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('get', KEYS[2])) or 0, holds}
end
return {0, redis.call('pttl', KEYS[1])}
