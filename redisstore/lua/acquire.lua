-- acquire.lua: take a reentrant lock for an owner, or report the holder's remaining lease.
-- Uses lib.lua. Serves Mutex.
-- KEYS[1]  lock hash, named exactly as the user named the lock (Redisson RLock layout:
--          field "<client-uuid>:<n>" -> hold count, key TTL = lease)
-- KEYS[2]  fencing counter, redisson_lock_token:{name} (Redisson RFencedLock layout)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<n>"
-- KEYS[3]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[3]  restart grace: "0" for none, else "<µs>@<start µs>:<run id>" (see grace_at());
--          a fresh grant inside it is refused with {0, ms left, "grace"}
-- Returns  {1, token, holds} when the owner now holds the lock;
--          {0, pttl} when someone else holds it (pttl in ms, -1 for no expiry);
--          {-1, what} when KEYS[1] holds something that is not a lock (see not_lock):
--          nothing is changed.
-- A re-entry keeps the tenure's token. Redisson's RLock takes the lock only when the key is
-- absent or holds its own field, so Java and Go clients exclude each other. A hash held by
-- an RWMutex (field "mode") excludes a Mutex the same way. A fresh grant on an absent key
-- needs no shape check. Touches only KEYS.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    return fresh_grant(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[2], ARGV[1])
end
local what = not_lock(KEYS[1], 'lock')
if what then
    return {-1, what}
end
return reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1]) or {0, pttl}
