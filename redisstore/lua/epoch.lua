-- epoch.lua: lower the restart marker's start time once the server's uptime is known.
-- KEYS[1]  restart marker, leash:epoch (or leash:epoch:{<slot tag>} on Cluster)
-- ARGV[1]  the value acquire.lua wrote when it created the marker (µs, server clock)
-- ARGV[2]  the server's start time from INFO server (µs), earlier than ARGV[1]
-- Returns  1 when lowered; 0 when the marker is gone or holds another value (the server
--          restarted meanwhile, or another client lowered it first): nothing changes.
-- A compare-and-set, so that an uptime read from a server that has since restarted
-- never shortens the grace of the new incarnation.
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('set', KEYS[1], ARGV[2])
    return 1
end
return 0
