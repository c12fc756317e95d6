-- job_history.lua: read a scheduled job's latest claim and last runs. Uses lib.lua. Read-only.
-- Serves JobStore.History.
-- KEYS[1]  job state, leash_job:{name}     KEYS[2]  job runs, leash_job_runs:{name}
-- KEYS[3]  the job's run lock, named as the job (whether each running record's claimer holds it)
-- ARGV[1]  how many records, newest first (0: all)
-- Returns  {latest tick or 0, its attempt or 0, now (Unix ms), {records (JSON)}, {for each
--          record still running, as job_holds says of its claimer: 2 when it holds KEYS[3],
--          1 when someone else does, 0 when no one does; 0 for other records (the Go side
--          decides with driver.ReportedRuns whether a running record reads lost)}, the job's
--          spec ('' if none)}; {-1, what} when KEYS[1] or KEYS[2] holds what leash does not
--          write there.
-- Touches only KEYS, which share the job's hash slot.
local refused = job_refusal(KEYS[1], KEYS[2])
if refused then
    return refused
end
local st = redis.call('hmget', KEYS[1], 'tick', 'attempt', 'spec')
local lt, la = tonumber(st[1]), tonumber(st[2])
local recs = redis.call('lrange', KEYS[2], 0, tonumber(ARGV[1]) - 1)
local held = {}
for i, s in ipairs(recs) do
    held[i] = 0
    local ok, rec = pcall(cjson.decode, s)
    if ok and type(rec) == 'table' and rec.outcome == 'running' then
        held[i] = job_holds(KEYS[3], rec.client or '')
    end
end
return {lt or 0, la or 0, now_ms(), recs, held, st[3] or ''}
