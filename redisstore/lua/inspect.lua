-- inspect.lua: read everything held on a name in one snapshot. Uses lib.lua. Read-only.
-- KEYS[1]  the lock hash or semaphore zset, named as the lock
-- KEYS[2]  fencing counter       KEYS[3]  fair queue
-- KEYS[4]  readers               KEYS[5]  waiting writers
-- KEYS[6]  semaphore permit count
-- Returns  {type of KEYS[1], its contents (HGETALL, or ZRANGE WITHSCORES), its PTTL, the last
--          token (nil if none), the server time in ms, the readers (ZRANGE WITHSCORES),
--          queued waiters (fair places + waiting writers), the permit count (nil if none)};
--          {-1, what} when KEYS[1] holds something that is not a lock (see not_lock): its
--          contents are not read; {-1, what} too when a companion key (KEYS[2] to KEYS[6])
--          holds what leash does not write there (see companion).
local what = not_lock(KEYS[1], nil, KEYS[6])
if what then
    return {-1, what}
end
local bad = foreign(KEYS[2], 'counter', KEYS[3], 'owners', KEYS[4], 'owners', KEYS[5], 'owners',
    KEYS[6], 'counter')
if bad then
    return bad
end
local typ = redis.call('type', KEYS[1]).ok
local main = {}
if typ == 'hash' then
    main = redis.call('hgetall', KEYS[1])
elseif typ == 'zset' then
    main = redis.call('zrange', KEYS[1], 0, -1, 'withscores')
end
return {typ, main, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]), now_ms(),
    redis.call('zrange', KEYS[4], 0, -1, 'withscores'),
    redis.call('zcard', KEYS[3]) + redis.call('zcard', KEYS[5]), redis.call('get', KEYS[6])}
