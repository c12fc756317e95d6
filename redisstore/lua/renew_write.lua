-- renew_write.lua: extend the leases of many readers-writer write locks, each only if its
-- owner still holds it, and never below a live reader's lease (see hold_for). Uses lib.lua.
-- KEYS[2i-1]   lock hash i
-- KEYS[2i]     its readers, leash_rw_readers:{name} (all KEYS hash to one Cluster slot; the
--              caller groups them)
-- ARGV[2i-1]   owner field of lock i
-- ARGV[2i]     lease of lock i in milliseconds
-- Returns      one entry per lock, as renew.lua: 1 renewed; 0 the lock is gone (absent, or
--              not a lock: see not_lock); 2 the key is a lock the owner does not hold; 3 the
--              owner's lock was revoked (see revoke.lua). Never
--              creates a key, nor touches one the owner does not hold. A readers key holding
--              a user's data (see companion) is neither read nor touched: the lease is
--              renewed as if no reader held. Touches only KEYS.
local out = {}
for i = 1, #KEYS, 2 do
    local held = try('hexists', KEYS[i], ARGV[i])
    if held == 1 and foreign(KEYS[i + 1], 'owners') then
        redis.call('pexpire', KEYS[i], ARGV[i + 1]) -- no reader of leash's lives in a user's key
        out[#out + 1] = 1
    elseif held == 1 then
        hold_for(KEYS[i], KEYS[i + 1], ARGV[i + 1], now_ms())
        out[#out + 1] = 1
    elseif held == 0 and revoked_of(KEYS[i], ARGV[i]) then
        out[#out + 1] = 3
    elseif held == 0 and redis.call('exists', KEYS[i]) == 1 and not not_lock(KEYS[i], 'lock') then
        out[#out + 1] = 2
    else
        out[#out + 1] = 0
    end
end
return out
