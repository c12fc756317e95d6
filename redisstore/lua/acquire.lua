-- acquire.lua: take a reentrant lock for an owner, or report the holder's remaining lease.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson RLock layout:
--          field "<client-uuid>:<n>" -> hold count, key TTL = lease)
-- KEYS[2]  fencing counter, redisson_lock_token:{name} (Redisson RFencedLock layout)
-- KEYS[3]  restart marker, leash:epoch (one per Cluster slot: leash:epoch:{<slot tag>}),
--          holding the server's start time in microseconds (server clock)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<n>"
-- ARGV[3]  restart grace in microseconds; "0" turns the grace off
-- Returns  {1, token, holds} when the owner now holds the lock;
--          {0, pttl} when another owner holds it (pttl in ms, -1 for no expiry);
--          {0, ms, created, start} in the restart grace: no fresh grant until the server
--          has been up for the grace (ms left), created = 1 when this call created the
--          marker with start = now, the pessimistic guess the caller may lower (epoch.lua).
-- The marker is lost with the data in a restart without persistence; its absence means
-- that leases granted before the restart may still be running, so fresh grants wait.
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
    if ARGV[3] ~= '0' then
        local created = 0
        local start = tonumber(redis.call('get', KEYS[3]))
        if not start then
            start, created = now, 1
            redis.call('set', KEYS[3], string.format('%.0f', now))
        end
        local left = start + tonumber(ARGV[3]) - now
        if left > 0 then
            return {0, math.ceil(left / 1000), created, start}
        end
    end
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
