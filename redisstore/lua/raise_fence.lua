-- raise_fence.lua: raise a name's fencing counter to a floor, never lower it; grant nothing.
-- Uses lib.lua. Serves RaiseFence (package redlock: after a quorum grants, the members that
-- granted learn the quorum's token, so that every later majority issues a larger one).
-- KEYS[1]  fencing counter, redisson_lock_token:{name} (see mint)
-- ARGV[1]  the floor: a positive decimal integer without leading zeros
-- Returns  1 when the counter was raised to the floor, 0 when it was already at or above it;
--          {-1, what} when KEYS[1] holds something that is not a counter (see companion):
--          nothing is changed.
-- The next token mint issues is then max(counter + 1, server time in µs) > floor. Counters
-- are compared as decimals (lengths, then strings, leading zeros dropped), never as Lua
-- numbers, which are exact only below 2^53. Touches only KEYS.
local what = companion(KEYS[1], 'counter')
if what then
    return {-1, what}
end
local counter = redis.call('get', KEYS[1])
local floor = ARGV[1]
if counter then
    counter = string.gsub(counter, '^0+', '')
    if #counter > #floor or (#counter == #floor and counter >= floor) then
        return 0
    end
end
redis.call('set', KEYS[1], floor)
return 1
