-- acquire.lua: take a reentrant lock for an owner, or report the holder's remaining lease.
-- Uses lib.lua. Serves Mutex (a waiter that is not starving; a starving one's attempts run
-- acquire_fair.lua, where its mark is a place in the fair queue).
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson RLock layout:
--          field "<client-uuid>:<n>" -> hold count, key TTL = lease)
-- KEYS[2]  fencing counter, redisson_lock_token:{name} (Redisson RFencedLock layout)
-- KEYS[3]  fair queue, leash_fair_queue:{name}: starving Mutex waiters' marks and FairMutex
--          waiters' places (see acquire_fair.lua)
-- KEYS[4]  fair places, leash_fair_places:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<n>"
-- KEYS[5]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[3]  restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--          (see grace_at); a fresh grant inside it is refused with {0, ms left, "grace"}, and one
--          on a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns  {1, token, holds} when the owner now holds the lock;
--          {0, pttl} when someone else holds it (pttl in ms, -1 for no expiry), or
--          {0, pttl, 1} when waiters are queued as well (KEYS[3] exists);
--          {0, ms, 1} when the lock is free but a starving or fair waiter is queued (ms:
--          the first one's place lifetime): the queue drains before anyone barges in again;
--          {-1, what} when KEYS[1] holds something that is not a lock (see not_lock), or a
--          queue key holds what leash does not write there (see companion): nothing is
--          changed.
-- A re-entry keeps the tenure's token. Redisson's RLock takes the lock only when the key is
-- absent or holds its own field, so Java and Go clients exclude each other (a Java client
-- ignores the queue: it is excluded, only not made to wait in line). A hash held by an
-- RWMutex (field "mode") excludes a Mutex the same way. A fresh grant on an absent key with
-- no queue needs no shape check, and costs one EXISTS as the PTTL it replaces did. Touches
-- only KEYS.
local found = redis.call('exists', KEYS[1], KEYS[3])
if found == 0 then
    return fresh_grant(KEYS[1], KEYS[2], KEYS[5], ARGV[3], ARGV[2], ARGV[1])
end
-- (lib.lua: the functions only the rest calls are defined here, see withLibSource)
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    local bad = foreign(KEYS[3], 'owners', KEYS[4], 'owners')
    if bad then
        return bad
    end
    local now = now_ms()
    purge_queue(KEYS[3], KEYS[4], now)
    local head = redis.call('zrange', KEYS[3], '0', '0')[1]
    if head == nil then
        return fresh_grant(KEYS[1], KEYS[2], KEYS[5], ARGV[3], ARGV[2], ARGV[1])
    end
    return {0, tonumber(redis.call('zscore', KEYS[4], head)) - now, 1}
end
local what = not_lock(KEYS[1], 'lock')
if what then
    return {-1, what}
end
local held
if found == 2 then
    held = reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1], KEYS[3], KEYS[4]) -- or picked up: see release.lua
else
    held = reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
end
if held then
    return held
end
if found == 2 then
    return {0, pttl, 1}
end
return {0, pttl}
