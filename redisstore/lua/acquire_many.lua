-- acquire_many.lua: take several reentrant locks for one owner, all or none.
-- Uses lib.lua. Serves MultiLock, for names in one hash slot.
-- KEYS[1]     restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster): see fresh_token()
-- KEYS[2i]    lock hash i (Mutex layout)
-- KEYS[2i+1]  fencing counter of lock i, redisson_lock_token:{name i}
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner field
-- ARGV[3]     restart grace: "0" for none, else "[<end µs>=]<µs>@<start µs>:<run id>[#<node id>]"
--             (see grace_at); fresh grants inside it are refused with {0, ms left, "grace"}, and on
--             a server the view does not name with {0, 0, "stale"}, nothing written
-- Returns     {1, token 1, token 2, ...} when the owner now holds every lock (a lock it held
--             already is re-entered and keeps its token); {0, ms} when some lock is held by
--             someone else: the shortest remaining lease among those, -1 if none expires;
--             {-1, what, i} when lock i is not a lock (see not_lock) or its fencing counter is
--             not one (see companion): nothing is changed; every name is checked first.
-- Touches only KEYS, all in one slot.
local blocked = nil
local first = nil -- the first lock not held yet
for i = 2, #KEYS, 2 do
    local what = not_lock(KEYS[i], 'lock') or companion(KEYS[i + 1], 'counter')
    if what then
        return {-1, what, i / 2}
    end
end
for i = 2, #KEYS, 2 do
    if redis.call('exists', KEYS[i]) == 1 and redis.call('hexists', KEYS[i], ARGV[2]) == 0 then
        local p = redis.call('pttl', KEYS[i])
        if blocked == nil or (p >= 0 and (blocked < 0 or p < blocked)) then
            blocked = p
        end
    end
    if first == nil and redis.call('exists', KEYS[i]) == 0 then
        first = i
    end
end
if blocked ~= nil then
    return {0, blocked}
end
-- The first fresh grant's token is minted before anything else is written: the restart grace
-- it checks refuses the whole request, and the other fresh grants pass it at the same time.
-- Each later one mints from a time one µs later than the one before, as if it had read the
-- clock anew, so every name gets a token of its own.
local token, refused = nil, nil
local step = 0
if first then
    token, refused = fresh_token(KEYS[first + 1], KEYS[1], ARGV[3])
    if not token then
        return refused
    end
end
local out = {1}
for i = 2, #KEYS, 2 do
    local r = reenter(KEYS[i], KEYS[i + 1], ARGV[2], ARGV[1])
    if r then
        out[#out + 1] = r[2]
    elseif i == first then
        out[#out + 1] = take(KEYS[i], ARGV[2], ARGV[1], token)[2]
    else
        step = step + 1
        out[#out + 1] = grant(KEYS[i], KEYS[i + 1], ARGV[2], ARGV[1], step)[2]
    end
end
return out
