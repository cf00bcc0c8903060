-- time.lua: the call's clock, and instants relative to it.
--
-- A call's ARGV[1] is "" to read Redis's clock (TIME), or a pinned instant
-- in Unix nanoseconds (tests only). Instants are stored as decimal
-- nanoseconds; the algorithms see each one relative to now, in its
-- limit's ticks (p.tick nanoseconds: 1, or 1000 for a long limit, algo.lua).
-- Now is kept as seconds and nanoseconds (T.s, T.n) and as microseconds
-- (T.us), so that a stored instant converts to a relative one by parts:
-- every number formed stays below 2^53, exact in a double.

local T = {}
local BIG = 1152921504606846976 -- 2^60: beyond any relative instant a limit uses
local FAR = 4503599627370496 -- 2^52 ticks: algo.Far
-- The standard functions the library uses most, as locals: set by the
-- first T.init, as a function library may not read them while it loads.
local sub, format, floor, min, max

-- fdiv returns floor(a / b) for b > 0, a and b integers below 2^53: the
-- double quotient, corrected where it rounded across an integer.
local function fdiv(a, b)
	local q = floor(a / b)
	local r = a - q * b
	if r < 0 then
		q = q - 1
	elseif r >= b then
		q = q + 1
	end
	return q
end

-- mod returns a mod b, in [0, b), for b > 0.
local function mod(a, b)
	return a - fdiv(a, b) * b
end

-- std sets the standard functions' locals; T.init calls it, and an entry
-- point that reads no clock (reset) calls it first.
function T.std()
	if floor == nil then
		sub, format, floor, min, max = string.sub, string.format, math.floor, math.min, math.max
	end
end

-- init reads the call's clock; each call's entry point calls it first.
function T.init()
	T.std()
	local v = ARGV[1]
	T.pinned = v ~= ''
	if T.pinned then
		local len = #v
		if len > 9 then
			T.s, T.n = tonumber(sub(v, 1, len - 9)), tonumber(sub(v, len - 8))
		else
			T.s, T.n = 0, tonumber(v)
		end
	else
		local t = redis.call('TIME')
		T.s, T.n = tonumber(t[1]), tonumber(t[2]) * 1000
	end
	T.us = T.s * 1000000 + floor(T.n / 1000)
	T.offsets = nil
	T.cals = nil
end

-- word returns a stored instant (decimal ns, leading zeros allowed)
-- minus now, in p's ticks, rounded down to a tick; nil when it lies more
-- than FAR ahead (a word a check reads as fresh, algo.lua), and -2^60 for
-- one more than 104 days before now in a limit of nanoseconds.
function T.word(p, raw)
	local len = #raw
	if p.tick ~= 1 then
		local d = -T.us
		if len > 3 then
			d = tonumber(sub(raw, 1, len - 3)) + d
		end
		if d > FAR then
			return nil
		end
		return d
	end
	local ds, n
	if len > 9 then
		ds, n = tonumber(sub(raw, 1, len - 9)) - T.s, tonumber(sub(raw, len - 8))
	else
		ds, n = -T.s, tonumber(raw)
	end
	if ds >= 9000000 then
		return nil
	elseif ds <= -9000000 then
		return -BIG
	end
	local d = ds * 1000000000 + (n - T.n)
	if d > FAR then
		return nil
	end
	return d
end

-- rel is word for an instant that may lie further ahead (a log's entry):
-- 2^60 then.
function T.rel(p, raw)
	local d = T.word(p, raw)
	if d == nil then
		return BIG
	end
	return d
end

-- raw writes now + d (ticks of p) as a stored instant.
function T.raw(p, d)
	if p.tick ~= 1 then
		local us = T.us + d
		if us == 0 then
			return '0'
		end
		return format('%d000', us)
	end
	local q = floor(d / 1000000000)
	local s, n = T.s + q, T.n + (d - q * 1000000000)
	if n >= 1000000000 then
		s, n = s + 1, n - 1000000000
	elseif n < 0 then
		s, n = s - 1, n + 1000000000
	end
	if s == 0 then
		return format('%d', n)
	end
	return format('%d%09d', s, n)
end

-- ms returns the instant now + d (ticks of p) in whole Unix milliseconds.
function T.ms(p, d)
	if p.tick ~= 1 then
		return floor((T.us + d) / 1000)
	end
	return T.s * 1000 + floor((T.n + d) / 1000000)
end

-- mulmod returns (a * b) mod m for 0 <= a, b < m < 2^52, by doubling.
local function mulmod(a, b, m)
	local r = 0
	local bits = {}
	while b > 0 do
		local bit = b % 2
		bits[#bits + 1] = bit
		b = (b - bit) / 2
	end
	for i = #bits, 1, -1 do
		r = r * 2
		if r >= m then
			r = r - m
		end
		if bits[i] == 1 then
			r = r + a
			if r >= m then
				r = r - m
			end
		end
	end
	return r
end

-- cal returns a calendar limit's four window starts (A.params) relative
-- to now, in p's ticks; a call keeps them per limit.
function T.cal(p)
	local cals = T.cals
	if cals == nil then
		cals = {}
		T.cals = cals
	end
	local b = cals[p]
	if b == nil then
		b = {}
		for i = 1, 4 do
			b[i] = T.word(p, p.cal[i])
			if b[i] == nil then
				b[i] = BIG
			end
		end
		cals[p] = b
	end
	return b
end

-- calWindow returns the start of the window of the three that holds d
-- (relative to now, ticks), or nil.
local function calWindow(b, d)
	for i = 1, 3 do
		if b[i] <= d and d < b[i + 1] then
			return b[i]
		end
	end
	return nil
end

-- calOffset is offset for a calendar limit: now's offset in the window
-- of the three Go sent that holds it. A now outside all three is a clock
-- a window or more from Go's: the script refuses it.
local function calOffset(p)
	local ws = calWindow(T.cal(p), 0)
	if ws == nil then
		error('bouncer: the calendar windows Go sent do not hold Redis\'s clock: the two clocks differ by a window or more')
	end
	return -ws
end

-- wend returns the end of the window that starts at ws (relative to now,
-- ticks of p): ws plus the period, or for a calendar limit the next of
-- its window starts.
function T.wend(p, ws)
	if p.cal ~= nil then
		local b = T.cal(p)
		for i = 1, 3 do
			if b[i] == ws then
				return b[i + 1]
			end
		end
	end
	return ws + p.period
end

-- offset returns now's offset in its period-long window (aligned to the
-- Unix epoch, or a calendar limit's), in p's ticks; a call keeps it per
-- period.
function T.offset(p)
	if p.cal ~= nil then
		return calOffset(p)
	end
	local period = p.period
	local offs = T.offsets
	if offs == nil then
		offs = {}
		T.offsets = offs
	end
	local o = offs[period]
	if o ~= nil then
		return o
	end
	if p.tick ~= 1 then
		o = mod(T.us, period)
	elseif period % 1000000000 == 0 then
		o = mod(T.s, period / 1000000000) * 1000000000 + T.n
	elseif 1000000000 % period == 0 then
		o = T.n % period
	else
		o = mod(mulmod(mod(T.s, period), 1000000000 % period, period) + T.n % period, period)
	end
	offs[period] = o
	return o
end

-- window returns the start of the window that holds a stored instant,
-- relative to now, and the instant's offset in it (ticks of p); nil when
-- the instant is more than FAR ahead of now (a state read as fresh,
-- algo.lua).
function T.window(p, raw)
	local d = T.word(p, raw)
	if d == nil then
		return nil
	elseif d < -FAR then
		return d, 0 -- long gone: no window a check compares it with
	end
	if p.cal ~= nil then
		local b = T.cal(p)
		local ws = calWindow(b, d)
		if ws ~= nil then
			return ws, d - ws
		end
		if d >= b[4] then
			return nil -- beyond the next window: read as fresh (algo's windowOf)
		end
		return d, 0 -- before the three: a finished window, no check compares with it
	end
	local m = mod(d + T.offset(p), p.period)
	return d - m, m
end
