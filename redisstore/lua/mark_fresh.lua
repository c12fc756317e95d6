-- mark_fresh.lua: set the restart marker, as MarkFresh does for a new server. Uses lib.lua.
-- KEYS[1]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster)
-- ARGV[1]  the marker: "0:<server id>"
-- Returns  false when set; what the key holds when it holds what leash does not write there
--          (see foreign_marker): nothing is changed then.
local what = foreign_marker(KEYS[1], try('get', KEYS[1]))
if what then
    return what
end
redis.call('set', KEYS[1], ARGV[1])
return false
