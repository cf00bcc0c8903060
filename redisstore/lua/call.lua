-- call.lua: a call's KEYS and ARGV, and R, which sends a command about a
-- key: every key the library touches goes through it, and is one of the
-- call's KEYS. An entry point calls enter first, which sets them (R is
-- redis.call, there only while a function runs, not while its library
-- loads). The tests compose the library with an R that refuses a key not
-- in KEYS instead.
local KEYS, ARGV, R
local function enter(keys, args)
	KEYS, ARGV, R = keys, args, redis.call
end
