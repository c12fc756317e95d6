-- inspect.lua: read a lock's owners, remaining lease and last fencing token in one snapshot.
-- KEYS[1]  lock hash
-- KEYS[2]  fencing counter, redisson_lock_token:{name}
-- Returns  {fields, pttl, token}: fields is the flat HGETALL array (owner, holds, ...),
--          pttl in ms (-2 absent, -1 no expiry), token the counter (nil if none).
-- Read-only. Touches only KEYS.
return {redis.call('hgetall', KEYS[1]), redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2])}
