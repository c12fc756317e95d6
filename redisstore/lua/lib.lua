-- lib.lua: functions shared by the scripts. The Go side prepends this file to every
-- script whose header says "uses lib.lua". Every time is the server's (TIME), never a
-- client's, so deadlines mean the same to every client whatever their clocks.
redis.replicate_commands()

-- now_ms returns the server time in milliseconds.
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- next_token stores and returns the next fencing token of a name: max(counter + 1,
-- server time in microseconds). Tokens keep growing even when the counter is lost (a
-- restart without persistence, a failover to a lagging replica), as long as the server
-- clock does not step back past the lost counter. Redisson's RFencedLock INCRs the same
-- counter, so Java and Go tokens interleave in one increasing sequence.
local function next_token(key)
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local token = math.max((tonumber(redis.call('get', key)) or 0) + 1, now)
    redis.call('set', key, string.format('%.0f', token))
    return token
end

-- last_token returns a name's last fencing token, 0 if none.
local function last_token(key)
    return tonumber(redis.call('get', key)) or 0
end

-- extend raises key's time to live to at least ms milliseconds; it never lowers it.
local function extend(key, ms)
    if redis.call('pttl', key) < tonumber(ms) then
        redis.call('pexpire', key, ms)
    end
end

-- purge drops from zset z the members whose score, a deadline in ms, has passed, and
-- returns how many remain.
local function purge(z, now)
    redis.call('zremrangebyscore', z, '-inf', now)
    return redis.call('zcard', z)
end

-- purge_queue drops from a fair queue (owner -> arrival) the owners whose place
-- (places: owner -> deadline in ms) has run out.
local function purge_queue(queue, places, now)
    for _, owner in ipairs(redis.call('zrangebyscore', places, '-inf', now)) do
        redis.call('zrem', queue, owner)
        redis.call('zrem', places, owner)
    end
end

-- first_score and last_score return the lowest and highest score of zset z, or nil.
local function first_score(z)
    return tonumber(redis.call('zrange', z, 0, 0, 'withscores')[2])
end
local function last_score(z)
    return tonumber(redis.call('zrange', z, -1, -1, 'withscores')[2])
end

-- grant gives the free exclusive lock to owner: a new token, one hold, the lease. It
-- returns the acquire reply {1, token, 1}.
local function grant(lock, tokenkey, owner, lease)
    local token = next_token(tokenkey)
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, token, 1}
end

-- reenter adds a hold to the exclusive lock if owner holds it, refreshing the lease, and
-- returns the acquire reply {1, token, holds} (the tenure keeps its token); nil otherwise.
local function reenter(lock, tokenkey, owner, lease)
    if redis.call('hexists', lock, owner) == 0 then
        return nil
    end
    local holds = redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, last_token(tokenkey), holds}
end

-- latched returns the answer recorded for a release request that already ran (a transport
-- retry), or nil.
local function latched(latch)
    local done = redis.call('get', latch)
    if done then
        return tonumber(done)
    end
    return nil
end

-- drop_hold begins the release of an owner's exclusive hold. It returns true and the reply
-- when the release ends here: a retried request's first answer, nil when the owner holds
-- nothing, or 0 when one of several holds was dropped (mode "one", the lease re-applied).
-- It returns false when the owner's last hold must go: the caller frees the lock, wakes
-- waiters and records 1 in the latch.
local function drop_hold(lock, latch, owner, lease, mode, latchms)
    local done = latched(latch)
    if done then
        return true, done
    end
    if redis.call('hexists', lock, owner) == 0 then
        return true, nil
    end
    if mode == 'one' then
        local holds = redis.call('hincrby', lock, owner, -1)
        if holds > 0 then
            redis.call('pexpire', lock, lease)
            redis.call('set', latch, 0, 'px', latchms)
            return true, 0
        end
    end
    return false
end

-- grace_at is grace at server time now (µs), given the marker's value (false if absent).
local function grace_at(marker, grace_us, now, value)
    local created = 0
    local start = tonumber(value)
    if not start then
        start, created = now, 1
        redis.call('set', marker, string.format('%.0f', now))
    end
    local left = start + tonumber(grace_us) - now
    if left > 0 then
        return {0, math.ceil(left / 1000), created, start}
    end
    return nil
end

-- grace enforces the restart grace before a fresh grant. marker is the restart marker
-- (leash:epoch, or leash:epoch:{<slot tag>} on Cluster): the server's start time in
-- microseconds, lost with the data when the server restarts without persistence. Its
-- absence means leases granted before the restart may still run, so nothing is granted
-- until the server has been up for grace_us microseconds. A missing marker is set to "now"
-- (the pessimistic guess; the client may lower it from INFO server with epoch.lua). It
-- returns nil when a fresh grant may proceed, else the reply {0, ms left, created, start}
-- (created = 1 when this call set the marker). A grace_us of "0" turns it off.
local function grace(marker, grace_us)
    if grace_us == '0' then
        return nil
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    return grace_at(marker, grace_us, now, redis.call('get', marker))
end

-- fresh_grant gives the free exclusive lock to owner, as grant does, unless the restart
-- grace refuses it (see grace): it returns {1, token, 1} or the refusal. It is grace and
-- grant in fewer calls, for the hot path: one TIME serves both, and one MGET reads the
-- marker and the fencing counter together.
local function fresh_grant(lock, tokenkey, marker, grace_us, owner, lease)
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local counter
    if grace_us == '0' then
        counter = redis.call('get', tokenkey)
    else
        local v = redis.call('mget', marker, tokenkey)
        local refused = grace_at(marker, grace_us, now, v[1])
        if refused then
            return refused
        end
        counter = v[2]
    end
    local token = math.max((tonumber(counter) or 0) + 1, now)
    redis.call('set', tokenkey, string.format('%.0f', token))
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, token, 1}
end
