-- renew_lease.lua: extend many per-owner leases kept in zsets (readers, permits), each only
-- if it is still live. Uses lib.lua.
-- KEYS[3i-2]  zset of leases: leash_rw_readers:{name} for a reader, the semaphore for a permit
-- KEYS[3i-1]  key to keep alive at least as long: the lock hash for a reader, the zset itself
--             for a permit
-- KEYS[3i]    a reader's timeout key, {name}:<owner>:rwlock_timeout:1 (see acquire_read.lua),
--             set to the new lease (and its field put back in a read-mode hash that lacks it); the zset again for a permit (all KEYS hash to one Cluster
--             slot; the caller groups them)
-- ARGV[2i-1]  owner
-- ARGV[2i]    lease in milliseconds
-- Returns     one entry per request: 1 renewed; 0 gone (absent, or its lease had ended: an
--             ended lease is removed, never resurrected, and a reader's hold in the hash with
--             it; or the semaphore's zset, or the reader's lock hash, is not one any more: see
--             not_lock). Touches only KEYS, and never one that is not a lock.
local now = now_ms()
local out = {}
for i = 1, #KEYS, 3 do
    local j = (i - 1) / 3 * 2 + 1
    local owner, lease = ARGV[j], tonumber(ARGV[j + 1])
    local reader = KEYS[i + 1] ~= KEYS[i] -- a permit names its zset thrice
    local s = try('zscore', KEYS[i], owner)
    if s and reader and not_lock(KEYS[i + 1], 'lock') then
        redis.call('zrem', KEYS[i], owner) -- a reader whose lock hash was replaced
        redis.call('del', KEYS[i + 2])
        s = false
    end
    if s and tonumber(s) > now then
        redis.call('zadd', KEYS[i], now + lease, owner)
        extend(KEYS[i], lease)
        if reader then
            keep_reader_field(KEYS[i + 1], owner)
            extend(KEYS[i + 1], lease)
            redis.call('set', KEYS[i + 2], 1, 'px', lease)
        end
        out[#out + 1] = 1
    else
        if s then
            redis.call('zrem', KEYS[i], owner)
            if reader then
                redis.call('hdel', KEYS[i + 1], owner)
                redis.call('del', KEYS[i + 2])
            end
        end
        out[#out + 1] = 0
    end
end
return out
