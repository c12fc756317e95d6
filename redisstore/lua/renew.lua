-- renew.lua: extend the leases of many locks, each only if its owner still holds it.
-- Uses lib.lua.
-- KEYS[i]      lock hash i (all KEYS hash to one Cluster slot; the caller groups them)
-- ARGV[2i-1]   owner field of KEYS[i]
-- ARGV[2i]     lease of KEYS[i] in milliseconds
-- Returns      an array with one entry per key: 1 renewed; 0 the lock is gone (the key is
--              absent, or holds something that is not a lock: see not_lock); 2 the key is a
--              lock the owner does not hold; 3 the owner's lock was revoked (the key is its
--              tombstone, see revoke.lua).
-- Never creates a key, and never touches one the owner does not hold, so a renewal that
-- arrives after a release, or finds a user's data under the name, changes nothing.
-- Redisson's watchdog script does the same check (HEXISTS, then PEXPIRE) per key.
local out = {}
for i, key in ipairs(KEYS) do
    local held = try('hexists', key, ARGV[2 * i - 1])
    if held == 1 then
        redis.call('pexpire', key, ARGV[2 * i])
        out[i] = 1
    elseif held == 0 and revoked_of(key, ARGV[2 * i - 1]) then
        out[i] = 3
    elseif held == 0 and redis.call('exists', key) == 1 and not not_lock(key, 'lock') then
        out[i] = 2
    else
        out[i] = 0
    end
end
return out
