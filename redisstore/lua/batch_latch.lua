-- batch_latch.lua: the release latch of a batched release call. The Go side puts it in place
-- of lib.lua's latched and set_latch in the batched variant of release.lua (withLibBatched);
-- it is not a script of its own.
--
-- latched and set_latch do what lib.lua's do, for a whole call: the call keeps the answers of
-- all its requests in one latch, its first request's (latch_key), written once by write_latch
-- when the call ends, where the requests alone would each create a key of their own. A
-- transport retry of a batched call is the same call (go-redis sends the same command again),
-- so request i of a retry finds its first answer at place i of that latch; a request finds
-- the answer of an earlier one with the same latch key in its own call, and keeps it at its
-- own place for a retry. On Cluster, where the requests of a call refused with TRYAGAIN are
-- sent again one by one, batched releases keep a latch each (see withLibBatched). latch_got
-- holds the call's answers by place and by latch key, latch_i is the place of the request
-- running, latch_ms the longest lifetime any request of the call asks (a decimal string),
-- latch_new whether a request answered anew in this attempt, latch_stored the latch's value
-- (false for none).
local latch_got, latch_i, latch_key, latch_ms, latch_new, latch_stored = nil, nil, nil, nil, nil, nil
local function latched(latch)
    local v = latch_got[latch]
    if not v then
        if latch_stored == nil then
            latch_stored = redis.call('get', latch_key) or false
        end
        v = latch_stored and string.sub(latch_stored, latch_i, latch_i)
        if not v or v == '-' or v == '' then
            return nil -- nil, not false: release.lua then asks what the lock key holds
        end
    end
    -- Kept at this request's place too: a retry of the call finds it there.
    latch_got[latch], latch_got[latch_i] = v, v
    return tonumber(v)
end
local function set_latch(latch, v, ms)
    latch_got[latch], latch_got[latch_i] = v, v
    latch_new = true
end

-- latch_asks notes the latch lifetime ms (a decimal string) that a request of the call asks,
-- before it runs, whether it answers anew in this attempt or reads its answer back: a retry
-- of the call may come until the latest of its callers' deadlines, so the latch keeps every
-- answer that long, and every attempt writes it with the same lifetime.
local function latch_asks(ms)
    if #ms > #latch_ms or (#ms == #latch_ms and ms > latch_ms) then
        latch_ms = ms
    end
end

-- write_latch writes the call's latch: one character per request of the n, its answer or "-"
-- for none. An answer an earlier attempt of the same call recorded is kept where this attempt
-- gave none (a request that held nothing the first time and holds its lock when the retry
-- comes): SET NX writes the latch when no attempt has.
local function write_latch(n)
    if not latch_new then
        return -- every answer it holds was read from the latch, which keeps them
    end
    for i = 1, n do
        latch_got[i] = latch_got[i] or '-'
    end
    if redis.call('set', latch_key, table.concat(latch_got, '', 1, n), 'px', latch_ms, 'nx') then
        return
    end
    local earlier = latch_stored or redis.call('get', latch_key) or ''
    for i = 1, n do
        if latch_got[i] == '-' then
            local v = string.sub(earlier, i, i)
            if v ~= '' then
                latch_got[i] = v
            end
        end
    end
    redis.call('set', latch_key, table.concat(latch_got, '', 1, n), 'px', latch_ms)
end
