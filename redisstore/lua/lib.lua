-- lib.lua: functions shared by the scripts. The Go side prepends this file to every
-- script whose header says "uses lib.lua". Every time is the server's (TIME), never a
-- client's, so deadlines mean the same to every client whatever their clocks. Arguments to
-- redis.call are strings where that is easy ('0', not 0, and string.format('%d', n) for a
-- computed integer): Redis 7.0 turns a Lua number into a command argument with "%.17g", a few
-- thousand instructions each, measurable on the hot paths (see bench/NOTES.md). State a
-- function keeps for one script call (a reply read once, a memo) is a top-level local that
-- starts nil, written "local name = nil" (or "local a, b = nil, nil"): the Go side recognises
-- that form (perCallLocal) and declares it before the per-request function of a batched
-- script (withLibBatched), so that it lasts the whole call and not one request.
redis.replicate_commands()

-- server_time returns the server's TIME reply, asked once per script and kept: every time a
-- script uses is one instant, read in one call.
local time_reply = nil
local function server_time()
    if not time_reply then
        time_reply = redis.call('time')
    end
    return time_reply
end

-- now_ms returns the server time in milliseconds.
local function now_ms()
    local t = server_time()
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_us returns the server time in microseconds, as a number and as its decimal string; or,
-- given step, the time step microseconds later (a script that mints the tokens of several
-- names from its one TIME gives each a step of its own, and so a token of its own). Times in
-- microseconds have 16 digits, and formatting or parsing a number that long (string.format,
-- tonumber) takes the C library's slow multi-precision path: the hot scripts build and read
-- them in pieces instead. The time without a step is built once per script call.
local now_n, now_str = nil, nil
local function now_us(step)
    if not step and now_n then
        return now_n, now_str
    end
    local t = server_time()
    local sec, us = t[1], t[2]
    if step then
        us = tonumber(us) + step
        sec = tostring(tonumber(sec) + math.floor(us / 1000000))
        us = us % 1000000
    end
    local n, s = tonumber(sec) * 1000000 + tonumber(us), sec .. string.sub('00000' .. us, -6)
    if not step then
        now_n, now_str = n, s
    end
    return n, s
end

-- decimal parses a non-negative decimal integer string, such as a token or a time in
-- microseconds, in two short pieces (see now_us). It returns nil for anything else.
local function decimal(s)
    if not s or not string.find(s, '^%d+$') then
        return nil
    end
    if #s <= 9 then
        return tonumber(s)
    end
    return tonumber(string.sub(s, 1, -10)) * 1000000000 + tonumber(string.sub(s, -9))
end

-- try runs a command that fails with WRONGTYPE when its key holds another Redis type, and
-- returns its reply, or false for WRONGTYPE (any other error is raised). Scripts use it where
-- a lock is expected but a user's data may sit under the name instead: that key is then
-- left alone, never an error that leaves the outcome unknown.
local function try(...)
    local r = redis.pcall(...)
    if type(r) == 'table' and r.err then
        if string.find(r.err, 'WRONGTYPE', 1, true) then
            return false
        end
        error(r)
    end
    return r
end

-- owner_shaped reports whether s is a lock owner: "<client-id>:<n>", optionally followed by
-- "@<explicit owner>" (leash), as Redisson's "<uuid>:<thread id>" (and its write lock's
-- "<uuid>:<thread id>:write"). The client id is a UUID in its 8-4-4-4-12 hexadecimal form,
-- as leash's and Redisson's (UUID.randomUUID) are: requiring it keeps an application's hash
-- whose fields merely look like "user:1" from being taken for a lock.
local uuid_owner = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x:%d+'
local shaped = nil -- owner_shaped's verdicts in this script call: a queue's owners recur
local function owner_shaped(s)
    if s == nil then
        return false
    end
    shaped = shaped or {}
    local v = shaped[s]
    if v == nil then
        local _, e = string.find(s, uuid_owner)
        v = e ~= nil and (e == #s or string.byte(s, e + 1) == 64 or string.sub(s, e + 1) == ':write')
        shaped[s] = v
    end
    return v
end

-- not_lock is the one recognizer of what is a lock, used by every script that touches a name
-- and by List and Inspect. It returns nil when key is absent or holds a lock of family fam,
-- and otherwise a few words saying what key holds (for the Go side's NotALockError). fam is
-- 'lock' (Mutex, FairMutex, RWMutex, Redisson's RLock and RReadWriteLock: a hash with an
-- expiry whose fields are owners (see owner_shaped) with positive hold counts, and perhaps
-- "mode" = "read" or "write", and "revoked" = revoked owners, one a line: a tombstone, see
-- revoke.lua), 'semaphore' (a zset whose lowest-scored member is an owner,
-- with leash's permit count at sizekey), or nil for either. sizekey may be nil outside
-- semaphore scripts: a zset is then not a lock (for fam 'lock', one of owners is called a
-- semaphore). Of a hash of more than 256 fields (a
-- Redisson read lock has one per reading thread) only the first HSCAN page is read: a
-- bounded sample, and a user's hash is refused by its first non-lock field.
local function not_lock(key, fam, sizekey)
    local typ = redis.call('type', key).ok
    if typ == 'none' then
        return nil
    end
    if typ == 'hash' then
        if redis.call('pttl', key) < 0 then
            return 'a hash without lock fields'
        end
        local f
        if redis.call('hlen', key) > 256 then
            f = redis.call('hscan', key, '0', 'count', '256')[2]
        else
            f = redis.call('hgetall', key)
        end
        for i = 1, #f, 2 do
            if f[i] == 'mode' then
                if f[i + 1] ~= 'read' and f[i + 1] ~= 'write' then
                    return 'a hash without lock fields'
                end
            elseif f[i] == 'revoked' then
                for o in string.gmatch(f[i + 1], '[^\n]+') do
                    if not owner_shaped(o) then
                        return 'a hash without lock fields'
                    end
                end
            elseif not owner_shaped(f[i]) or not string.find(f[i + 1], '^[1-9]%d*$') then
                return 'a hash without lock fields'
            end
        end
        if fam == 'semaphore' then
            return 'a mutex or readers-writer lock, not a semaphore'
        end
        return nil
    end
    if typ == 'zset' then
        if not owner_shaped(redis.call('zrange', key, '0', '0')[1]) then
            return 'a zset that is not a semaphore'
        end
        -- A lock script has no sizekey: it refuses a zset of owners as the semaphore it
        -- looks like, without the count that would prove it.
        if sizekey and redis.call('exists', sizekey) == 0 or not sizekey and fam ~= 'lock' then
            return 'a zset that is not a semaphore'
        end
        if fam == 'lock' then
            return 'a semaphore, not a mutex or readers-writer lock'
        end
        return nil
    end
    return 'a ' .. typ
end

-- lock_mode returns a readers-writer lock's mode ("read" or "write"), or false when key holds
-- no such field or is not a hash.
local function lock_mode(key)
    return try('hget', key, 'mode') or false
end

-- revoked_of reports whether owner is among the revoked owners of lock's tombstone (the
-- field "revoked", one owner a line: see revoke.lua).
local function revoked_of(lock, owner)
    local r = try('hget', lock, 'revoked')
    if not r then
        return false
    end
    for o in string.gmatch(r, '[^\n]+') do
        if o == owner then
            return true
        end
    end
    return false
end

-- companion returns nil when key, one of a name's companion keys, is absent or holds what
-- leash and Redisson write there, and otherwise a few words naming key and what it holds
-- (for the {-1, what} refusal: a script touches none of a name's keys then). shape is
-- 'counter' (a string of a non-negative decimal below 2^53-1, which Lua's numbers hold
-- exactly: the fencing counter, the semaphore's permit count) or 'owners' (a zset of owners,
-- see owner_shaped: the fair queue and places, the readers, the waiting writers; its first
-- and last members are the sample judged).
-- foreign checks several (key, shape) pairs and returns the first refusal {-1, what}, or nil;
-- one EXISTS when all are absent, as they mostly are.
local function companion(key, shape)
    if shape == 'owners' then
        -- ZRANGE answers an absent key with no member and any other type with WRONGTYPE: the
        -- TYPE below is needed only for the refusal's words.
        local first = try('zrange', key, '0', '0')
        if first then
            if first[1] == nil or owner_shaped(first[1])
                and owner_shaped(redis.call('zrange', key, '-1', '-1')[1]) then
                return nil
            end
            return 'a zset of non-owners at its companion key ' .. key
        end
    end
    local typ = redis.call('type', key).ok
    if typ == 'none' then
        return nil
    end
    local what = 'a ' .. typ
    if shape == 'counter' and typ == 'string' then
        local v = redis.call('get', key)
        if not string.find(v, '^%d+$') then
            what = 'a string that is not a counter'
        elseif #v < 16 or (#v == 16 and v < '9007199254740991') then
            return nil
        else
            what = 'a counter at 2^53-1 or more (past what a script counts exactly)'
        end
    end
    return what .. ' at its companion key ' .. key
end
local function foreign(...)
    local kv = {...}
    local keys = {}
    for i = 1, #kv, 2 do
        keys[#keys + 1] = kv[i]
    end
    if redis.call('exists', unpack(keys)) == 0 then
        return nil
    end
    for i = 1, #kv, 2 do
        local what = companion(kv[i], kv[i + 1])
        if what then
            return {-1, what}
        end
    end
    return nil
end

-- refusal returns {-1, what} when lock is not a lock of family fam (see not_lock), or else the
-- first of the companion (key, shape) pairs that follow that is foreign (see foreign); nil when
-- the script may go on. It is the prologue of the scripts that take a lock and its companions.
local function refusal(lock, fam, ...)
    local what = not_lock(lock, fam)
    if what then
        return {-1, what}
    end
    return foreign(...)
end


-- mint sets a name's fencing counter (key, whose value is counter, false if absent) to
-- the next token and returns it: max(counter + 1, now), now being the server time in
-- microseconds (now_s its string). Tokens keep growing even when the counter is lost (a
-- restart without persistence, a failover to a lagging replica), as long as the server
-- clock does not step back past the lost counter. Redisson's RFencedLock INCRs the same
-- counter, so Java and Go tokens interleave in one increasing sequence. Both are decimal
-- strings without leading zeros, so comparing lengths, then strings, compares numbers. A
-- counter that is not a decimal string (a user's hash or text, a negative number) is not
-- leash's, nor is one at 2^53-1 or more, whose next token Lua could not tell from the last
-- (leash's counter is a time in µs, below 2^53 until the year 2255; Redisson's a count): mint
-- then writes nothing and returns nil and the refusal {-1, what} (see companion). Only a
-- counter read as absent or not decimal costs the extra TYPE. A caller that has looked
-- already passes whether counter is decimal, as is_decimal, and checked when it has also
-- found a counter that is not decimal to be absent or leash's (foreign).
local function mint(key, counter, now, now_s, is_decimal, checked)
    if is_decimal == nil then
        is_decimal = counter and string.find(counter, '^[1-9]%d*$') ~= nil
    end
    if is_decimal then
        if #counter > #now_s or (#counter == #now_s and counter >= now_s) then
            if #counter > 16 or (#counter == 16 and counter >= '9007199254740991') then
                -- Past 2^53-1 the token INCR returns is a Lua number (a double) that may
                -- round to the last one: refused, in companion's words.
                return nil, {-1, companion(key, 'counter')}
            end
            return redis.call('incr', key)
        end
    elseif not checked then
        local refused = foreign(key, 'counter')
        if refused then
            return nil, refused
        end
    end
    redis.call('set', key, now_s)
    return now
end

-- next_token stores and returns the next fencing token of a name (see mint), minted from the
-- time step µs after now (see now_us). Its caller has checked the counter (see companion).
local function next_token(key, step)
    local now, now_s = now_us(step)
    return assert(mint(key, try('get', key), now, now_s), 'leash: unchecked fencing counter')
end

-- last_token returns a name's last fencing token, 0 if none.
local function last_token(key)
    return decimal(redis.call('get', key)) or 0
end

-- extend raises key's time to live to at least ms milliseconds; it never lowers it.
local function extend(key, ms)
    if redis.call('pttl', key) < tonumber(ms) then
        redis.call('pexpire', key, ms)
    end
end

-- purge drops from zset z the members whose score, a deadline in ms, has passed, and
-- returns how many remain.
local function purge(z, now)
    redis.call('zremrangebyscore', z, '-inf', now)
    return redis.call('zcard', z)
end

-- purge_readers is purge for the readers of a readers-writer lock (zset readers: owner -> end
-- of its lease in ms): it also drops each ended reader's field from the lock hash, where every
-- leash reader keeps a hold as Redisson's readers do (see acquire_read.lua), so that the hash
-- lists only live holds. It returns how many readers remain. A lock key that is not a hash
-- (a user's data, see not_lock) is not touched.
local function purge_readers(readers, lock, now)
    local gone = redis.call('zrangebyscore', readers, '-inf', now)
    if #gone == 0 then
        return redis.call('zcard', readers)
    end
    redis.call('zremrangebyscore', readers, '-inf', now)
    if redis.call('type', lock).ok == 'hash' then
        for i = 1, #gone, 1000 do
            redis.call('hdel', lock, unpack(gone, i, math.min(i + 999, #gone)))
        end
    end
    return redis.call('zcard', readers)
end

-- keep_reader_field puts a live leash reader's field back in a read-mode lock hash that
-- lacks it (one a Redisson reader made again after the hash was deleted or expired), so that
-- Redisson's readers count the hold again. Any other hash, or none, is left as it is.
local function keep_reader_field(lock, owner)
    if try('hget', lock, 'mode') == 'read' and redis.call('hexists', lock, owner) == 0 then
        redis.call('hset', lock, owner, 1)
    end
end

-- purge_queue drops from a fair queue (owner -> arrival) the owners whose place
-- (places: owner -> deadline in ms) has run out.
local function purge_queue(queue, places, now)
    for _, owner in ipairs(redis.call('zrangebyscore', places, '-inf', string.format('%d', now))) do
        redis.call('zrem', queue, owner)
        redis.call('zrem', places, owner)
    end
end

-- first_score and last_score return the lowest and highest score of zset z, or nil.
local function first_score(z)
    return tonumber(redis.call('zrange', z, '0', '0', 'withscores')[2])
end
local function last_score(z)
    return tonumber(redis.call('zrange', z, '-1', '-1', 'withscores')[2])
end

-- hold_for sets a readers-writer lock's time to live (hash lock) to lease ms, or to the end of
-- the last reader's lease in zset readers when that is later: a writer's lease (renewed short,
-- or cut by UnlockAfter) must never end the hash under a live reader, its own downgrade, or a
-- Mutex or a Redisson RLock would be granted beside that reader.
local function hold_for(lock, readers, lease, now)
    local last = last_score(readers)
    if last and last - now > tonumber(lease) then
        lease = last - now
    end
    redis.call('pexpire', lock, lease)
end

-- take gives the free exclusive lock to owner under a new token: one hold, the lease. It
-- returns the acquire reply {1, token, 1}.
local function take(lock, owner, lease, token)
    redis.call('hincrby', lock, owner, '1')
    redis.call('pexpire', lock, lease)
    return {1, token, 1}
end

-- grant gives the free exclusive lock to owner with the next token (see take and next_token),
-- ignoring the restart grace: for the locks of a request whose grace fresh_token has already
-- checked.
local function grant(lock, tokenkey, owner, lease, step)
    return take(lock, owner, lease, next_token(tokenkey, step))
end

-- reenter adds a hold to the exclusive lock if owner holds it, refreshing the lease, and
-- returns the acquire reply {1, token, holds} (the tenure keeps its token); nil otherwise.
-- Given the fair queue and places (queue may be nil), a lock a release handed to owner
-- while it waited in the queue (see release.lua: owner holds the lock and still has its
-- entry there) is picked up instead: the entry goes, the lease is set, and no hold is added.
-- The queue is written only where it holds owner's entry, which makes it leash's. A queue key
-- that is not a zset (the application's data: ZREM fails and writes nothing), or, beside
-- owner's entry, a places key that is not one, makes it return the refusal {-1, what} (see
-- foreign) instead, the lock untouched (the queue then lost only owner's own entry).
local function reenter(lock, tokenkey, owner, lease, queue, places)
    if redis.call('hexists', lock, owner) == 0 then
        return nil
    end
    local token = last_token(tokenkey) -- read before the first write
    local picked = queue and try('zrem', queue, owner)
    if picked == false or (picked == 1 and try('zrem', places, owner) == false) then
        return foreign(queue, 'owners', places, 'owners')
    end
    if picked == 1 then
        redis.call('pexpire', lock, lease)
        return {1, token, tonumber(redis.call('hget', lock, owner))}
    end
    local holds = redis.call('hincrby', lock, owner, '1')
    redis.call('pexpire', lock, lease)
    return {1, token, holds}
end

-- latched returns the answer recorded for a release request that already ran (a transport
-- retry), or nil; set_latch records a release's answer, "0" (a hold dropped) or "1" (freed),
-- in its latch for ms milliseconds. A batched release call defines both anew, to keep its
-- requests' answers in one latch (lua/batch_latch.lua).
local function latched(latch)
    local done = redis.call('get', latch)
    if done then
        return tonumber(string.sub(done, 1, 1)) -- a batched call's latch holds one answer a request
    end
    return nil
end
local function set_latch(latch, v, ms)
    redis.call('set', latch, v, 'px', ms)
end

-- drop_hold begins the release of an owner's exclusive hold. It returns true and the reply
-- when the release ends here: a retried request's first answer, nil when the owner holds
-- nothing, or 0 when one of several holds was dropped (mode "one", the lease re-applied).
-- It returns false when the owner's last hold is gone, its field removed: the caller frees
-- the lock, wakes waiters and records 1 in the latch. Releasing every hold (mode "all")
-- reads the latch only when the owner holds nothing: every tenure has an owner of its own,
-- so an owner that is still there has not been released by an earlier attempt. A lock key
-- that is not a hash (a user's data, see not_lock) holds no owner: nothing is touched.
local function drop_hold(lock, latch, owner, lease, mode, latchms)
    if mode == 'all' then
        if try('hdel', lock, owner) ~= 1 then
            return true, latched(latch)
        end
        return false
    end
    local done = latched(latch)
    if done then
        return true, done
    end
    if try('hexists', lock, owner) ~= 1 then
        return true, nil
    end
    if redis.call('hincrby', lock, owner, -1) > 0 then
        redis.call('pexpire', lock, lease)
        set_latch(latch, '0', latchms)
        return true, 0
    end
    redis.call('hdel', lock, owner)
    return false
end

-- same_process reports whether this script runs on the server process that grace, the
-- client's view "[<end µs>=]<µs>@<start µs>:<run id>[/<replication id>][#<node id>]" (see
-- grace_at), names: a view read before a restart or a failover, or of another Cluster node
-- than the one a redirect brought the script to, must not vouch for the grace of this
-- process. "0" (no grace) and a grace without a view (tests' marker-only rule) name no
-- process. INFO is read at most once per script call (a batched one included: one server
-- process runs it all), and INFO replication only for a view that names a replication id (a
-- promoted replica's).
local info_server, info_repl = nil, nil
local function same_process(grace)
    local id = string.match(grace, '^[%d=]+@%d*:([^#]+)')
    if not id then
        return true
    end
    local run, slash, repl = string.match(id, '^([^/]*)(/?)(.*)$')
    info_server = info_server or redis.call('info', 'server')
    -- Plain searches for the whole line: a pattern would scan the reply a character at a time.
    if not string.find(info_server, '\nrun_id:' .. run .. '\r', 1, true) then
        return false
    end
    if slash == '' then
        return true
    end
    info_repl = info_repl or redis.call('info', 'replication')
    return string.find(info_repl, '\nmaster_replid:' .. repl .. '\r', 1, true) ~= nil
end

-- same_node reports whether this script runs on the Cluster node (CLUSTER MYID) whose id
-- node is; nil (a single server, or a client the ACL denies CLUSTER MYID) names none. The id
-- is read at most once per script call.
local my_id = nil
local function same_node(node)
    if not node then
        return true
    end
    if not my_id then
        my_id = redis.call('cluster', 'myid')
    end
    return my_id == node
end

-- client_of returns the client id of an owner: what comes before its first ':'. A fair
-- queue head's wake-up is published on the fair channel with ':' .. client_of(head) appended,
-- which only that client subscribes (redisstore's WatchClient).
local function client_of(owner)
    return string.match(owner, '^[^:]*')
end

-- quick_over reports whether the restart grace is over, given the marker's value and a grace
-- argument that begins with the end of the grace counted from its view's start,
-- "<end µs>=<grace µs>@<view>" (see grace_at), when the marker names the view's process and
-- a start no later than the view's: the view itself, which any client of the process writes
-- (every client reads the same start, see parseFacts), or MarkFresh's "0:<id>". false tells
-- nothing: grace_at then judges by the whole rule. Strings of digits of one length compare
-- as the numbers they write, and a decimal of fewer digits than now is less than now.
local function quick_over(grace, value, now_s)
    local n = #now_s
    if string.byte(grace, n + 1) ~= 61 then -- no end as long as now_s, then "="
        return false
    end
    local at = string.find(grace, '@', n + 2, true)
    if not at then
        return false
    end
    local last -- the index in grace of the view's last character, before any "#<node id>"
    if string.find(grace, value, at + 1, true) == at + 1 then
        if now_s < string.sub(grace, 1, n) then
            return false
        end
        last = at + #value
    elseif string.byte(value, 1) == 48 and string.byte(value, 2) == 58 and at - n - 2 < n then
        -- "0:<id>", a grace that began in 1970 and is over if the grace has fewer digits than now
        local p = string.find(grace, string.sub(value, 2), at + 1, true)
        if not p then
            return false
        end
        last = p + #value - 2
    else
        return false
    end
    return last == #grace or (string.byte(grace, last + 1) == 35 and same_node(string.sub(grace, last + 2)))
end

-- foreign_marker returns nil when the restart marker key is absent or holds a marker (what
-- grace_at and MarkFresh write: decimal digits, then perhaps ':' and more), and otherwise a
-- few words naming what it holds: an application's key of that name is never overwritten.
-- value is the key's value as MGET or GET read it (false when absent or not a string).
local function foreign_marker(marker, value)
    if value then
        if string.find(value, '^%d+$') or string.find(value, '^%d+:') then
            return nil
        end
        return 'a string that is not a restart marker at leash\'s restart marker key ' .. marker
    end
    local typ = redis.call('type', marker).ok
    if typ == 'none' then
        return nil
    end
    return 'a ' .. typ .. ' at leash\'s restart marker key ' .. marker
end

-- grace_at returns the restart grace's refusal {0, ms left, "grace"} (see fresh_token) at
-- server time now (µs; now_s its string), given the marker's value (false if absent), or nil.
-- The marker reads "<start µs>:<run id>": the start of the grace, and the server process
-- (INFO server run_id) that wrote it. grace is "<grace µs>@<start µs>:<run id>[#<node id>]",
-- the client's view of the process it talks to (and, on Cluster, of its node); its start is
-- empty when the process may have been promoted from a replica (the grace then starts now).
-- A marker that is absent or was written by another process (one that restarted from a
-- snapshot, or whose replica was promoted) is replaced by the client's view: leases that
-- process granted may be lost. The view may be stale, of another node or process than the
-- one the script runs on (a slot migrated or failed over under a client's old slot map, a
-- master restarted since the client read INFO; a marker MIGRATE moved from the node the view
-- names would match it): so a marker that matches the view is trusted only on the node the
-- view names (same_node), and the view is written only on the process it names
-- (same_process). Otherwise grace_at writes nothing and returns {0, 0, "stale"}: the client
-- reads the node's view anew and tries again. A marker key that holds an application's data
-- (see foreign_marker) is never written: grace_at returns {-1, what}. A grace without "@"
-- keeps the marker-only rule of earlier versions (a missing marker starts the grace now; any
-- marker present is trusted), for tests' negative controls. With look set, the marker is read but never
-- written. A grace found over from the marker's value alone (nothing written) is remembered
-- for the rest of the script call: the requests of a batched script call share the marker
-- and the TIME, so each after the first is answered with three comparisons instead of the
-- parse (about 16,000 of Redis's instructions per request).
-- grace may begin with "<end µs>=", the end of the grace counted from the view's start (see
-- graceArg in grace.go), and quick_over then answers most calls in a few string operations
-- where the parse below costs a call about 13,000 more of Redis's instructions; whatever it
-- cannot answer goes to the parse, as a grace without the prefix does.
local graced, graced_value, graced_now = nil, nil, nil -- the last grace found over, see grace_at
local function grace_at(marker, grace, now, now_s, value, look)
    if value and value == graced_value and grace == graced and now == graced_now then
        return nil
    end
    if value and quick_over(grace, value, now_s) then
        graced, graced_value, graced_now = grace, value, now
        return nil
    end
    local arg = grace
    local eq = string.find(grace, '=', 1, true)
    if eq then
        grace = string.sub(grace, eq + 1)
    end
    local grace_us, view = string.match(grace, '^(%d+)@?(.*)$')
    local node = nil
    local hash = string.find(view, '#', 1, true)
    if hash then
        view, node = string.sub(view, 1, hash - 1), string.sub(view, hash + 1)
    end
    local sep = string.find(view, ':', 1, true)
    local start, read
    if value then
        local at = string.find(value, ':', 1, true)
        if not sep or (at and string.sub(value, at) == string.sub(view, sep)) then
            start = decimal(string.sub(value, 1, (at or 0) - 1))
            if start and not same_node(node) then
                return {0, 0, 'stale'}
            end
            read = start and value
        end
    end
    if not start then
        if sep and not same_process(grace) then
            return {0, 0, 'stale'}
        end
        local s = sep and decimal(string.sub(view, 1, sep - 1))
        local new = view
        start = s
        if not s then
            start, new = now, now_s .. (sep and string.sub(view, sep) or '')
        end
        if not look then
            local what = foreign_marker(marker, value)
            if what then
                return {-1, what}
            end
            redis.call('set', marker, new)
        end
    end
    -- A start ahead of now (a view read in the process's first seconds, see parseFacts) counts
    -- from now: the process runs, so it started no later.
    local left = math.min(start, now) + tonumber(grace_us) - now
    if left > 0 then
        return {0, math.ceil(left / 1000), 'grace'}
    end
    if read then
        graced, graced_value, graced_now = arg, value, now
    end
    return nil
end

-- is_stale reports whether r, a refusal of fresh_token or fresh_grant, is grace_at's
-- {0, 0, "stale"} or a {-1, what} (a companion or the marker holds an application's data): a
-- script that would write after a refusal (a place in line, a waiting writer's mark) returns
-- it at once instead, so that such a refusal leaves nothing behind.
local function is_stale(r)
    return r ~= nil and (r[3] == 'stale' or r[1] == -1)
end

-- fresh_token stores and returns the next fencing token of a name (see mint) for a fresh
-- grant, unless the restart grace refuses the grant: then it writes nothing but the marker
-- and returns nil and the reply {0, ms left, "grace"}. marker is the restart marker
-- (leash:epoch, or leash:epoch:{<slot tag>} on Cluster; see grace_at): leases granted by
-- an earlier server process may have been lost with the data (a restart without
-- persistence or from a snapshot, a promoted replica), so nothing is granted until the
-- server process has been up for the grace. A view the script cannot vouch for (see grace_at)
-- is refused with {0, 0, "stale"}, nothing written. A grace of "0" turns the grace off. One MGET
-- reads the marker and the fencing counter together. A counter that is not leash's (see
-- mint) is refused with {-1, what} before anything is written.
local function fresh_token(tokenkey, marker, grace)
    local now, now_s = now_us()
    local counter, is_decimal
    if grace == '0' then
        counter = try('get', tokenkey)
    else
        local v = redis.call('mget', marker, tokenkey)
        counter = v[2]
        is_decimal = counter and string.find(counter, '^[1-9]%d*$') ~= nil
        if not is_decimal then
            local refused = foreign(tokenkey, 'counter') -- before grace_at writes the marker
            if refused then
                return nil, refused
            end
        end
        local refused = grace_at(marker, grace, now, now_s, v[1])
        if refused then
            return nil, refused
        end
    end
    return mint(tokenkey, counter, now, now_s, is_decimal, grace ~= '0')
end

-- fresh_grant gives the free exclusive lock to owner, as take does, with a token from
-- fresh_token: it returns {1, token, 1} or the restart grace's refusal.
local function fresh_grant(lock, tokenkey, marker, grace_us, owner, lease)
    local token, refused = fresh_token(tokenkey, marker, grace_us)
    if not token then
        return refused
    end
    return take(lock, owner, lease, token)
end

-- job_refusal returns {-1, what} when a job's state key (a hash with the field "job") or its
-- runs key (a list of JSON records, judged by its newest) holds anything else, so that a
-- job's script touches none of its keys then; nil when each is absent or leash's.
local function job_refusal(state, runs)
    local typ = redis.call('type', state).ok
    if typ ~= 'none' and (typ ~= 'hash' or redis.call('hexists', state, 'job') == 0) then
        return {-1, 'a ' .. typ .. ' that is not a job\'s state, at ' .. state}
    end
    typ = redis.call('type', runs).ok
    if typ == 'none' then
        return nil
    end
    if typ == 'list' then
        local ok, rec = pcall(cjson.decode, redis.call('lindex', runs, 0))
        if ok and type(rec) == 'table' and type(rec.tick) == 'number' then
            return nil
        end
        return {-1, 'a list that is not a job\'s runs, at ' .. runs}
    end
    return {-1, 'a ' .. typ .. ' that is not a job\'s runs, at ' .. runs}
end

-- job_record returns the index (from 0, newest first) and the decoded record of the run of
-- tick and attempt in a job's runs list, or nil. It reads from the newest, one record at a
-- time, since the run looked for almost always is the newest or next to it.
local function job_record(runs, tick, attempt)
    local n = redis.call('llen', runs)
    for i = 0, n - 1 do
        local ok, rec = pcall(cjson.decode, redis.call('lindex', runs, i))
        if ok and type(rec) == 'table' and rec.tick == tick and rec.attempt == attempt then
            return i, rec
        end
    end
    return nil
end

-- job_holds returns 2 when the client id holds the lock (a field "<client>:<n>…" of a lock
-- hash) or a permit (a member of a semaphore zset) named lock, 1 when someone else does, 0
-- when no one does. Read-only, and of at most 1024 owners: a larger hash or zset is not a
-- job's lock (an application's data, which it only looks at the size of).
local function job_holds(lock, client)
    local typ = redis.call('type', lock).ok
    local owners
    if typ == 'hash' and redis.call('hlen', lock) <= 1024 then
        owners = redis.call('hkeys', lock)
    elseif typ == 'zset' and redis.call('zcard', lock) <= 1024 then
        owners = redis.call('zrange', lock, 0, -1)
    else
        return 0
    end
    local p = client .. ':'
    for _, o in ipairs(owners) do
        if string.sub(o, 1, #p) == p then
            return 2
        end
    end
    if #owners > 0 then
        return 1
    end
    return 0
end
