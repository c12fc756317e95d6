-- claim_tick.lua: claim a tick (an attempt) of a scheduled job, judged by the server's clock.
-- Uses lib.lua. Serves JobStore.ClaimTick.
-- KEYS[1]  job state, leash_job:{name}: a hash of job (the name), tick (ms), attempt,
--          outcome (of the latest claim's run), client (its claimer) and spec
-- KEYS[2]  job runs, leash_job_runs:{name}: a list of JSON records, newest first
-- KEYS[3]  the job's run lock, named as the job (read only: whether a claimer holds it)
-- ARGV[1]  tick, Unix ms          ARGV[2]  attempt (1, 2, …)
-- ARGV[3]  tolerance, ms          ARGV[4]  until, Unix ms; 0 for none
-- ARGV[5]  the run's record, JSON (host, pid, client; the script sets started and outcome)
-- ARGV[6]  records to keep        ARGV[7]  the job's name
-- ARGV[8]  the job's schedule (kept in the state's spec field); '' keeps the one kept
-- Returns  {'granted', now, previous tick or 0, the spec kept before or ''}; {'early', now, tick - now};
--          {'late', now}; {'taken', now, latest tick, its attempt, its record (JSON, or ''),
--          whether KEYS[3] is held: 2 by that record's claimer, 1 by someone else, 0 by no
--          one}; now in Unix ms.
--          {-1, what} when KEYS[1] or KEYS[2] holds what leash does not write there
--          (see job_refusal): nothing is changed then.
-- Touches only KEYS, which share the job's hash slot.
local refused = job_refusal(KEYS[1], KEYS[2])
if refused then
    return refused
end
local now = now_ms()
local tick, attempt = tonumber(ARGV[1]), tonumber(ARGV[2])
local st = redis.call('hmget', KEYS[1], 'tick', 'attempt', 'outcome', 'spec')
local lt, la, lo = tonumber(st[1]), tonumber(st[2]), st[3]
if la then
    if lt > tick or (lt == tick and (attempt ~= la + 1 or (lo ~= 'failed' and lo ~= 'cancelled')))
        or (tick > lt and attempt ~= 1) then
        local _, rec = job_record(KEYS[2], lt, la)
        if not rec then
            return {'taken', now, lt, la, '', 0}
        end
        return {'taken', now, lt, la, cjson.encode(rec), job_holds(KEYS[3], rec.client or '')}
    end
elseif attempt ~= 1 then
    return {'taken', now, 0, 0, '', 0}
end
if tick - now > tonumber(ARGV[3]) then
    return {'early', now, tick - now}
end
local until_ms = tonumber(ARGV[4])
if until_ms > 0 and now > until_ms then
    return {'late', now}
end
local rec = cjson.decode(ARGV[5])
rec.tick, rec.attempt, rec.started, rec.ended, rec.outcome = tick, attempt, now, 0, 'running'
redis.call('hset', KEYS[1], 'job', ARGV[7], 'tick', ARGV[1], 'attempt', ARGV[2], 'outcome', 'running',
    'client', rec.client or '')
if ARGV[8] ~= '' then
    redis.call('hset', KEYS[1], 'spec', ARGV[8])
end
redis.call('lpush', KEYS[2], cjson.encode(rec))
redis.call('ltrim', KEYS[2], 0, tonumber(ARGV[6]) - 1)
return {'granted', now, lt or 0, st[4] or ''}
