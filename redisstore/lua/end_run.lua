-- end_run.lua: record how a claimed run of a scheduled job ended. Uses lib.lua.
-- Serves JobStore.EndRun.
-- KEYS[1]  job state, leash_job:{name}     KEYS[2]  job runs, leash_job_runs:{name}
-- ARGV[1]  tick, Unix ms    ARGV[2]  attempt    ARGV[3]  the claimer's client id
-- ARGV[4]  outcome ("ok", "failed", …)    ARGV[5]  fencing token (decimal string)
-- ARGV[6]  error text
-- Returns  1 when the run's record was updated (and the state's outcome, when the run is the
--          latest claim); 0 when no record of the run is kept or another client claimed it;
--          {-1, what} when KEYS[1] or KEYS[2] holds what leash does not write there.
-- Touches only KEYS, which share the job's hash slot.
local refused = job_refusal(KEYS[1], KEYS[2])
if refused then
    return refused
end
local tick, attempt = tonumber(ARGV[1]), tonumber(ARGV[2])
local i, rec = job_record(KEYS[2], tick, attempt)
if not rec or rec.client ~= ARGV[3] then
    return 0
end
rec.outcome, rec.fence, rec.error, rec.ended = ARGV[4], ARGV[5], ARGV[6], now_ms()
redis.call('lset', KEYS[2], i, cjson.encode(rec))
local st = redis.call('hmget', KEYS[1], 'tick', 'attempt')
if tonumber(st[1]) == tick and tonumber(st[2]) == attempt then
    redis.call('hset', KEYS[1], 'outcome', ARGV[4])
end
return 1
