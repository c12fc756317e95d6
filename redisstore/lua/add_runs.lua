-- add_runs.lua: add records of runs never claimed (missed ticks) to a scheduled job's history.
-- Uses lib.lua. Serves JobStore.AddRuns.
-- KEYS[1]  job state, leash_job:{name}     KEYS[2]  job runs, leash_job_runs:{name}
-- ARGV[1]  records to keep    ARGV[2]  the job's name
-- ARGV[3…] the records, JSON, oldest first; a started or ended of 0 is set to the server's now
-- Returns  1; {-1, what} when KEYS[1] or KEYS[2] holds what leash does not write there.
-- Touches only KEYS, which share the job's hash slot. The state gets only its "job" field
-- (so the job is listed); the latest claim is left as it is. Each record goes below the
-- records of later ticks (the claim that found the ticks missed, made before): the list
-- stays newest tick first, and trimming it drops the oldest ticks, never that claim.
local refused = job_refusal(KEYS[1], KEYS[2])
if refused then
    return refused
end
local now = now_ms()
for i = 3, #ARGV do
    local rec = cjson.decode(ARGV[i])
    if rec.started == 0 then
        rec.started = now
    end
    if rec.ended == 0 then
        rec.ended = now
    end
    local s = cjson.encode(rec)
    local n, i, pivot = redis.call('llen', KEYS[2]), 0, nil
    while i < n do
        pivot = redis.call('lindex', KEYS[2], i)
        local ok, r = pcall(cjson.decode, pivot)
        if not ok or type(r) ~= 'table' or type(r.tick) ~= 'number' or r.tick <= rec.tick then
            break
        end
        i = i + 1
    end
    if i == 0 then
        redis.call('lpush', KEYS[2], s)
    elseif i == n then
        redis.call('rpush', KEYS[2], s)
    else
        redis.call('linsert', KEYS[2], 'before', pivot, s)
    end
end
redis.call('ltrim', KEYS[2], 0, tonumber(ARGV[1]) - 1)
redis.call('hset', KEYS[1], 'job', ARGV[2])
return 1
