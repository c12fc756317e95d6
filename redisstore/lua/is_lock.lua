-- is_lock.lua: tell whether a key is a lock, for List. Uses lib.lua. Read-only.
-- KEYS[1]  the key, a name found by SCAN
-- KEYS[2]  its semaphore permit count, leash_semaphore_size:{name}
-- Returns  1 when KEYS[1] is a lock or a semaphore, as every script judges it (see
--          not_lock); 0 otherwise. Touches only KEYS.
if not_lock(KEYS[1], nil, KEYS[2]) then
    return 0
end
return 1
