-- acquire_read.lua: take a reader's lease of a readers-writer lock.
-- Uses lib.lua. Serves RWMutex.RLock.
-- KEYS[1]  lock hash: field "mode" = "read" while only readers hold, "write" while a writer
--          holds (with its field "<owner>" -> hold count); TTL covers every holder
-- KEYS[2]  fencing counter, redisson_lock_token:{name}
-- KEYS[3]  readers, leash_rw_readers:{name}: zset owner -> end of that reader's lease in ms
-- KEYS[4]  waiting writers, leash_rw_writers:{name}: zset owner -> end of the mark in ms
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner
-- ARGV[3]  parent: the write lock's owner when its holder downgrades, else ""
-- KEYS[5]  the reader's timeout key, {name}:<owner>:rwlock_timeout:1 (Redisson's name for a
--          read hold's lease)
-- KEYS[6]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- ARGV[4]  restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--          (see grace_at); a fresh grant inside it is refused with {0, ms left, "grace"}, and one
--          on a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns  {1, token, 1} when granted; {0, ms} when a writer holds (its remaining lease) or
--          waits (until its mark ends); {-1, what} when KEYS[1] is not a lock (see not_lock),
--          or KEYS[2] to KEYS[4] hold what leash does not write there (see companion):
--          nothing is changed.
-- Each reader has its own lease, so a crashed reader frees its share alone. While a writer
-- waits, new readers are refused (no writer starvation), except the writer itself taking a
-- read lease under an owner of its own (a downgrade, ARGV[3] naming the writer). Touches
-- only KEYS.
-- Each reader also keeps a hold in the hash as a Redisson reader does: its field "<owner>" ->
-- 1 and its timeout key with its lease. Redisson's RReadWriteLock reads them: a Java reader
-- that leaves while leash readers hold keeps the hash (and so keeps Java writers out) as long
-- as their timeout keys live, where without them it would delete it.
local bad = refusal(KEYS[1], 'lock', KEYS[3], 'owners', KEYS[4], 'owners', KEYS[2], 'counter')
if bad then
    return bad
end
local now = now_ms()
local lease = tonumber(ARGV[1])
purge_readers(KEYS[3], KEYS[1], now)
purge(KEYS[4], now)
if redis.call('zscore', KEYS[3], ARGV[2]) then -- a retry of a granted read
    redis.call('zadd', KEYS[3], now + lease, ARGV[2])
    keep_reader_field(KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 1, 'px', lease)
    extend(KEYS[3], lease)
    extend(KEYS[1], lease)
    return {1, last_token(KEYS[2]), 1}
end
local mode = redis.call('hget', KEYS[1], 'mode')
local downgrade = mode == 'write' and ARGV[3] ~= '' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if redis.call('exists', KEYS[1]) == 1 and mode ~= 'read' and not downgrade then
    return {0, redis.call('pttl', KEYS[1])}
end
if not downgrade and redis.call('zcard', KEYS[4]) > 0 then
    return {0, first_score(KEYS[4]) - now}
end
local token, refused = fresh_token(KEYS[2], KEYS[6], ARGV[4])
if not token then
    return refused
end
redis.call('zadd', KEYS[3], now + lease, ARGV[2])
if downgrade then
    redis.call('hset', KEYS[1], ARGV[2], 1)
else
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
end
redis.call('set', KEYS[5], 1, 'px', lease)
extend(KEYS[3], lease)
extend(KEYS[1], lease)
return {1, token, 1}
