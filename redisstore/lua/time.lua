-- time.lua: the call's clock, instants relative to it, and windows.
--
-- A call's ARGV[1] is "" to read Redis's clock (TIME), or a pinned instant
-- in Unix nanoseconds (tests only). The algorithms see every instant relative to
-- now: a state's instant minus now, small for every limit shorter than
-- about 104 days. Instants are stored as decimal nanoseconds; now is kept
-- as seconds and nanoseconds (T.s, T.n), so that converting a stored
-- instant to and from a relative one takes no wide arithmetic when they
-- are close.

local T = {}

-- init reads the call's clock; each call's entry point calls it first.
function T.init()
	T.pinned = ARGV[1] ~= ''
	if T.pinned then
		T.s, T.n = N.wide(N.parse(ARGV[1]))
	else
		local t = redis.call('TIME')
		T.s, T.n = tonumber(t[1]), tonumber(t[2]) * 1000
	end
	T.now = N.norm(T.s, T.n)
	T.starts = nil
end

-- split returns a stored instant's seconds and nanoseconds.
local function split(raw)
	local len = #raw
	if len <= 9 then
		return 0, tonumber(raw)
	end
	return tonumber(string.sub(raw, 1, len - 9)), tonumber(string.sub(raw, len - 8))
end

-- rel returns the instant (s, n) minus now.
local function rel(s, n)
	local ds = s - T.s
	if ds > -9000000 and ds < 9000000 then
		return ds * 1000000000 + (n - T.n)
	end
	return N.norm(ds, n - T.n)
end

-- relRaw returns a stored instant minus now: rel(split(raw)), with the
-- common case, an instant of this era, in one step.
function T.relRaw(raw)
	local len = #raw
	if len > 9 then
		local ds = tonumber(string.sub(raw, 1, len - 9)) - T.s
		if ds > -9000000 and ds < 9000000 then
			return ds * 1000000000 + (tonumber(string.sub(raw, len - 8)) - T.n)
		end
	end
	return rel(split(raw))
end

function T.rel(instant)
	return N.sub(instant, T.now)
end

function T.at(d)
	return N.add(T.now, d)
end

-- rawAt writes now + d as a stored instant.
function T.rawAt(d)
	local s, n
	if type(d) == 'number' then
		local q = math.floor(d / 1000000000)
		s, n = T.s + q, T.n + (d - q * 1000000000)
		if n >= 1000000000 then
			s, n = s + 1, n - 1000000000
		elseif n < 0 then
			s, n = s - 1, n + 1000000000
		end
	else
		s, n = N.wide(N.add(T.now, d))
	end
	if s == 0 then
		return string.format('%d', n)
	end
	return string.format('%d%09d', s, n)
end

-- modSmall returns (s * 10^9 + n) mod p for a small p, exactly: whole
-- seconds and divisors of a second directly, other periods by doubling.
local function mulmod(a, b, m) -- (a * b) mod m, for 0 <= a, b < m < 2^52
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

local function modSmall(s, n, p)
	if p % 1000000000 == 0 then
		local ps = p / 1000000000
		return (s - math.floor(s / ps) * ps) * 1000000000 + n
	elseif 1000000000 % p == 0 then
		return n % p
	end
	local sm = s - math.floor(s / p) * p
	return (mulmod(sm, 1000000000 % p, p) + n % p) % p
end

-- offset returns the instant (s, n)'s offset in its period-long window.
local function offset(s, n, period)
	if type(period) == 'number' and period < 4503599627370496 then -- 2^52
		return modSmall(s, n, period)
	end
	return N.mod(N.norm(s, n), period)
end

-- startOf returns, relative to now, the start of the period-long window
-- (aligned to the Unix epoch) that holds now + d.
function T.startOf(d, period)
	if d == 0 then
		-- Every check of a call asks this for now and its period: the
		-- call keeps the answers.
		local starts = T.starts
		if starts == nil then
			starts = {}
			T.starts = starts
		end
		local st = starts[period]
		if st == nil then
			st = N.sub(0, offset(T.s, T.n, period))
			starts[period] = st
		end
		return st
	end
	local s, n = N.wide(N.add(T.now, d))
	return N.sub(d, offset(s, n, period))
end

-- windowRaw returns the start of the window that holds a stored instant,
-- relative to now, and the instant's offset from it.
function T.windowRaw(raw, period)
	local s, n = split(raw)
	local m = offset(s, n, period)
	return N.sub(rel(s, n), m), m
end
