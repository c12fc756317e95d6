-- release.lua: drop one or every hold of an owner; on the last one, delete the lock and wake
-- the next waiter, or hand the lock to it. Uses lib.lua. Serves Mutex and FairMutex.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson layout)
-- KEYS[2]  release channel, redisson_lock__channel:{name}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{name}:<request id>
-- KEYS[4]  fair queue, leash_fair_queue:{name} (see acquire_fair.lua)
-- KEYS[5]  fair places, leash_fair_places:{name}
-- KEYS[6]  fair channel, leash_fair__channel:{name}
-- KEYS[7]  fencing counter, redisson_lock_token:{name}; written only by a hand-off
-- KEYS[8]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[1]  owner field "<client-uuid>:<n>"
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  "one" to drop one hold, "all" to drop every hold of the owner
-- ARGV[4]  latch lifetime in milliseconds: how long a retry of this request may arrive
-- ARGV[5]  hand-off lease in ms; when positive, a lock freed while a FairMutex place or
--          starving Mutex mark is first is granted to that waiter; "0" (or absent) for none
-- ARGV[6]  restart grace of the hand-off's grant, as the acquire scripts take it (see
--          grace_at)
-- Returns  1 freed (or handed over); 0 still held, one hold dropped; nil when ARGV[1] holds
--          nothing (the Go side maps this to ErrNotHeld); {-1, what} when KEYS[1] holds
--          something that is not a lock (see not_lock; ErrNotHeld and ErrNotALock), or KEYS[4]
--          or KEYS[5] hold what leash does not write there (see companion): nothing is changed.
-- On the last hold: if FairMutex waiters (or starving Mutex marks) are queued, only the
-- head's waiter is woken, on its client's channel KEYS[6] .. ':' .. <client> (see
-- client_of); otherwise "0" is published on KEYS[2], as Redisson does, so Java and Go
-- waiters wake. With ARGV[5] > 0, the head is handed the lock in this step
-- (driver.HandoffStore): a fresh token (fresh_token: the clock floor and the restart grace,
-- here only on the server process the client's grace argument names, see same_process), a
-- lease of ARGV[5] ms or what the head's place had left if less, and the message
-- "=<token>:<lease ms>:<owner>" on the head's client's channel carries the grant. The head
-- keeps its entry in the queue, its place ending with the grant: that entry beside its field
-- in KEYS[1] marks the grant as not picked up yet (see reenter in lib.lua, and withdraw.lua).
-- A grace that refuses, or a counter that is not leash's, leaves the lock free and wakes the
-- head as with ARGV[5] = 0. The latch makes the release idempotent: a transport retry of the
-- same request (same request id) gets the first attempt's answer instead of ErrNotHeld or a
-- second decrement; Redisson's unlock uses the same latch (see drop_hold). A batched call of
-- several releases keeps their answers in its first request's latch, which a retry of the
-- same call reads (lua/batch_latch.lua). The fair queue is
-- read only when it exists. Touches only KEYS, and the head's client's channel, which shares
-- the name's hash tag and so its Cluster slot.
-- The queue's shape is checked before anything is written; an uncontended release, with no
-- queue, reads it with this one EXISTS.
local queued = redis.call('exists', KEYS[4], KEYS[5]) > 0
local finished, reply
if not queued then
    -- Nobody queued (an uncontended release): the last hold frees the lock and wakes every
    -- waiter, as at the end of this script.
    finished, reply = drop_hold(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
    if not finished then
        redis.call('publish', KEYS[2], '0')
        set_latch(KEYS[3], '1', ARGV[4])
        return 1
    end
    if reply ~= nil then
        return reply
    end
end
-- (lib.lua: the functions only the rest calls are defined here, see withLibSource)
if queued then
    local what = companion(KEYS[4], 'owners') or companion(KEYS[5], 'owners')
    if what then
        return {-1, what}
    end
    finished, reply = drop_hold(KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end
if finished then
    local what = reply == nil and not_lock(KEYS[1], 'lock')
    if what then
        return {-1, what}
    end
    return reply
end

-- The owner's field was the hash's only one: the hash went with it.
local head = nil
if queued and redis.call('exists', KEYS[4]) == 1 then
    local now = now_ms()
    redis.call('zrem', KEYS[4], ARGV[1]) -- a handed-off lock's entry, kept since (see above)
    redis.call('zrem', KEYS[5], ARGV[1])
    purge_queue(KEYS[4], KEYS[5], now)
    head = redis.call('zrange', KEYS[4], '0', '0')[1]
    local wait = tonumber(ARGV[5] or '0')
    if head and wait > 0 then
        local ms = math.min(wait, tonumber(redis.call('zscore', KEYS[5], head)) - now)
        if ms > 0 and same_process(ARGV[6]) then
            local token = fresh_token(KEYS[7], KEYS[8], ARGV[6])
            if token then
                local ms_s = string.format('%d', ms)
                take(KEYS[1], head, ms_s, token)
                redis.call('zadd', KEYS[5], string.format('%d', now + ms), head)
                -- '%d', not Lua's own formatting, which would round a 16-digit token.
                redis.call('publish', KEYS[6] .. ':' .. client_of(head),
                    '=' .. string.format('%d', token) .. ':' .. ms_s .. ':' .. head)
                set_latch(KEYS[3], '1', ARGV[4])
                return 1
            end
        end
    end
end
if head then
    redis.call('publish', KEYS[6] .. ':' .. client_of(head), head)
else
    redis.call('publish', KEYS[2], '0')
end
set_latch(KEYS[3], '1', ARGV[4])
return 1
