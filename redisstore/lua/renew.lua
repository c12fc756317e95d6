-- renew.lua: extend the leases of many locks, each only if its owner still holds it.
-- KEYS[i]      lock hash i (all KEYS hash to one Cluster slot; the caller groups them)
-- ARGV[2i-1]   owner field of KEYS[i]
-- ARGV[2i]     lease of KEYS[i] in milliseconds
-- Returns      an array with one entry per key: 1 renewed; 0 the key is gone;
--              2 the key exists but the owner does not hold it.
-- Never creates a key, so a renewal that arrives after a release changes nothing.
-- Redisson's watchdog script does the same check (HEXISTS, then PEXPIRE) per key.
local out = {}
for i, key in ipairs(KEYS) do
    if redis.call('hexists', key, ARGV[2 * i - 1]) == 1 then
        redis.call('pexpire', key, ARGV[2 * i])
        out[i] = 1
    elseif redis.call('exists', key) == 1 then
        out[i] = 2
    else
        out[i] = 0
    end
end
return out
