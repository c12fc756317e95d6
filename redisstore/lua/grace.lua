-- grace.lua: report how long the restart grace still refuses fresh grants. Uses lib.lua.
-- KEYS[1]  restart marker, leash:epoch (leash:epoch:{<slot tag>} on Cluster)
-- ARGV[1]  restart grace, as the acquire scripts take it (see grace_at())
-- Returns  the milliseconds left, 0 when the next fresh grant would be made at once, -1
--          when the view in ARGV[1] does not name this server (see grace_at: "stale"),
--          {-1, what} when the marker's key holds an application's data (see
--          foreign_marker), which every fresh grant refuses.
-- Reads only: the next acquire writes the marker if it must.
local now, now_s = now_us()
local value = try('get', KEYS[1])
local what = foreign_marker(KEYS[1], value)
if what then
    return {-1, what}
end
local r = grace_at(KEYS[1], ARGV[1], now, now_s, value, true)
if r and r[3] == 'stale' then
    return -1
elseif r then
    return r[2]
end
return 0
