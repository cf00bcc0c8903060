-- call.lua: a call's KEYS and ARGV, which its entry point sets, and R,
-- which sends a command about a key: every key the library touches goes
-- through it, and is one of the call's KEYS. The tests compose the library
-- with an R that refuses a key not in KEYS instead. (redis.call is there
-- only while a function runs, not while its library loads.)
local KEYS, ARGV
local function R(...)
	return redis.call(...)
end
