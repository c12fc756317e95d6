-- withdraw.lua: drop a waiter's place in a fair queue and its waiting-writer mark.
-- Uses lib.lua. Serves FairMutex, starving Mutex and RWMutex waiters that stop waiting.
-- KEYS[1]  lock hash
-- KEYS[2]  fair queue, leash_fair_queue:{name}
-- KEYS[3]  fair places, leash_fair_places:{name}
-- KEYS[4]  fair channel, leash_fair__channel:{name}
-- KEYS[5]  waiting writers, leash_rw_writers:{name}
-- KEYS[6]  readers-writer channel, leash_rw__channel:{name}
-- KEYS[7]  release channel, redisson_lock__channel:{name}
-- ARGV[1]  owner
-- Returns  1; nothing is changed when KEYS[2],
--          KEYS[3] or KEYS[5] hold what leash does not write there (see companion). If the
--          owner was the head of the queue and the lock is free, the new head is published
--          on its client's channel KEYS[4] .. ':' .. <client> (see client_of), or, when the
--          queue is now empty, "0" on KEYS[7] (as a release does),
--          so that the Mutex waiters the queue held back (see acquire.lua) come in; if it
--          was the last waiting writer and no writer holds, "r" is published on KEYS[6] so
--          that readers it kept out come in. A lock a release handed to the owner and that
--          it has not picked up (it holds KEYS[1] and is still the head of the queue: see
--          release.lua) is released first, so the next head is woken. Touches only KEYS, and
--          the new head's client's channel, in the name's Cluster slot.
if foreign(KEYS[2], 'owners', KEYS[3], 'owners', KEYS[5], 'owners') then
    return 1 -- a companion holds a user's data: touch nothing (the marks expire)
end
local now = now_ms()
purge_queue(KEYS[2], KEYS[3], now)
local head = redis.call('zrange', KEYS[2], '0', '0')[1]
if head == ARGV[1] and try('hexists', KEYS[1], ARGV[1]) == 1 and not not_lock(KEYS[1], 'lock') then
    -- A lock a release handed to the owner (see release.lua), not picked up: given back.
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if head == ARGV[1] and redis.call('exists', KEYS[1]) == 0 then
    local nexthead = redis.call('zrange', KEYS[2], '0', '0')[1]
    if nexthead then
        redis.call('publish', KEYS[4] .. ':' .. client_of(nexthead), nexthead)
    else
        redis.call('publish', KEYS[7], '0')
    end
end
if redis.call('zrem', KEYS[5], ARGV[1]) == 1 and purge(KEYS[5], now) == 0
    and lock_mode(KEYS[1]) ~= 'write' then
    redis.call('publish', KEYS[6], 'r')
end
return 1
