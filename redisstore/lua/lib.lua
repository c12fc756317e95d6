-- lib.lua: functions shared by the scripts. The Go side prepends this file to every
-- script whose header says "uses lib.lua". Every time is the server's (TIME), never a
-- client's, so deadlines mean the same to every client whatever their clocks.
redis.replicate_commands()

-- now_ms returns the server time in milliseconds.
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_us returns the server time in microseconds, as a number and as its decimal string.
-- Times in microseconds have 16 digits, and formatting or parsing a number that long
-- (string.format, tonumber) takes the C library's slow multi-precision path: the hot
-- scripts build and read them in pieces instead.
local function now_us()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000000 + tonumber(t[2]), t[1] .. string.sub('00000' .. t[2], -6)
end

-- decimal parses a non-negative decimal integer string, such as a token or a time in
-- microseconds, in two short pieces (see now_us). It returns nil for anything else.
local function decimal(s)
    if not s or not string.find(s, '^%d+$') then
        return nil
    end
    if #s <= 9 then
        return tonumber(s)
    end
    return tonumber(string.sub(s, 1, -10)) * 1000000000 + tonumber(string.sub(s, -9))
end

-- mint sets a name's fencing counter (key, whose value is counter, false if absent) to
-- the next token and returns it: max(counter + 1, now), now being the server time in
-- microseconds (now_s its string). Tokens keep growing even when the counter is lost (a
-- restart without persistence, a failover to a lagging replica), as long as the server
-- clock does not step back past the lost counter. Redisson's RFencedLock INCRs the same
-- counter, so Java and Go tokens interleave in one increasing sequence. Both are decimal
-- strings without leading zeros, so comparing lengths, then strings, compares numbers; a
-- counter that is not such a string (negative, say) is replaced, as a lost one would be.
local function mint(key, counter, now, now_s)
    if counter and string.find(counter, '^[1-9]%d*$')
        and (#counter > #now_s or (#counter == #now_s and counter >= now_s)) then
        return redis.call('incr', key)
    end
    redis.call('set', key, now_s)
    return now
end

-- next_token stores and returns the next fencing token of a name (see mint).
local function next_token(key)
    local now, now_s = now_us()
    return mint(key, redis.call('get', key), now, now_s)
end

-- last_token returns a name's last fencing token, 0 if none.
local function last_token(key)
    return decimal(redis.call('get', key)) or 0
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
    redis.call('hincrby', lock, owner, '1')
    redis.call('pexpire', lock, lease)
    return {1, token, 1}
end

-- reenter adds a hold to the exclusive lock if owner holds it, refreshing the lease, and
-- returns the acquire reply {1, token, holds} (the tenure keeps its token); nil otherwise.
local function reenter(lock, tokenkey, owner, lease)
    if redis.call('hexists', lock, owner) == 0 then
        return nil
    end
    local holds = redis.call('hincrby', lock, owner, '1')
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
            redis.call('set', latch, '0', 'px', latchms)
            return true, 0
        end
    end
    return false
end

-- grace_at is grace at server time now (µs; now_s its string), given the marker's value
-- (false if absent).
local function grace_at(marker, grace_us, now, now_s, value)
    local created = 0
    local start = decimal(value)
    if not start then
        start, created = now, 1
        redis.call('set', marker, now_s)
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
    local now, now_s = now_us()
    return grace_at(marker, grace_us, now, now_s, redis.call('get', marker))
end

-- fresh_grant gives the free exclusive lock to owner, as grant does, unless the restart
-- grace refuses it (see grace): it returns {1, token, 1} or the refusal. It is grace and
-- grant in fewer calls, for the hot path: one TIME serves both, and one MGET reads the
-- marker and the fencing counter together.
local function fresh_grant(lock, tokenkey, marker, grace_us, owner, lease)
    local now, now_s = now_us()
    local counter
    if grace_us == '0' then
        counter = redis.call('get', tokenkey)
    else
        local v = redis.call('mget', marker, tokenkey)
        local refused = grace_at(marker, grace_us, now, now_s, v[1])
        if refused then
            return refused
        end
        counter = v[2]
    end
    local token = mint(tokenkey, counter, now, now_s)
    redis.call('hincrby', lock, owner, '1')
    redis.call('pexpire', lock, lease)
    return {1, token, 1}
end
