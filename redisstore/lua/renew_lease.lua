-- renew_lease.lua: extend many per-owner leases kept in zsets (readers, permits), each only
-- if it is still live. Uses lib.lua.
-- KEYS[2i-1]  zset of leases: leash_rw_readers:{name} for a reader, the semaphore for a permit
-- KEYS[2i]    key to keep alive at least as long: the lock hash for a reader, the zset itself
--             for a permit (all KEYS hash to one Cluster slot; the caller groups them)
-- ARGV[2i-1]  owner
-- ARGV[2i]    lease in milliseconds
-- Returns     one entry per pair: 1 renewed; 0 gone (absent, or its lease had ended: an
--             ended lease is removed, never resurrected; or the semaphore's zset, or the
--             reader's lock hash, is not one any more: see not_lock). Touches only KEYS, and
--             never one that is not a lock.
local now = now_ms()
local out = {}
for i = 1, #KEYS, 2 do
    local lease = tonumber(ARGV[i + 1])
    local s = try('zscore', KEYS[i], ARGV[i])
    if s and KEYS[i + 1] ~= KEYS[i] and not_lock(KEYS[i + 1], 'lock') then
        redis.call('zrem', KEYS[i], ARGV[i]) -- a reader whose lock hash was replaced
        s = false
    end
    if s and tonumber(s) > now then
        redis.call('zadd', KEYS[i], now + lease, ARGV[i])
        extend(KEYS[i], lease)
        if KEYS[i + 1] ~= KEYS[i] then -- a permit names its zset twice
            extend(KEYS[i + 1], lease)
        end
        out[#out + 1] = 1
    else
        if s then
            redis.call('zrem', KEYS[i], ARGV[i])
        end
        out[#out + 1] = 0
    end
end
return out
