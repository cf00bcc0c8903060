-- num.lua: exact integers for Redis's Lua, whose numbers are doubles.
--
-- A value is a Lua number while |x| < 2^53 ("small"), or a table
-- {s, n} standing for s * 10^9 + n, 0 <= n < 10^9, |s| < 2^53 ("wide"):
-- instants (about 2^60.6 ns today) and the spans of long limits (a year is
-- 2^54.8 ns). Every function takes either form and returns the small one
-- whenever the value fits, so that the common case — a limit whose spans
-- are below 2^53 ns, about 104 days — computes on plain numbers.
--
-- The algorithms (tokenbucket.lua and the others) compute with these
-- functions alone, so that they are exact at every magnitude the Go
-- package algo accepts.

local N = {}
local E9 = 1000000000
local MAX = 9007199254740992 -- 2^53
local SMAX = 9007199 -- |s| below it: s * 10^9 + n < 2^53
N.MAX = MAX

-- norm returns s * 10^9 + n, n being any integer with |n| < 2^53, in
-- normal form.
local function norm(s, n)
	if n < 0 or n >= E9 then
		local c = math.floor(n / E9)
		s, n = s + c, n - c * E9
		if n < 0 then
			s, n = s - 1, n + E9
		elseif n >= E9 then
			s, n = s + 1, n - E9
		end
	end
	if s > -SMAX and s < SMAX then
		return s * E9 + n
	end
	return { s, n }
end
N.norm = norm

-- wide returns x's seconds and nanoseconds.
local function wide(x)
	if type(x) == 'table' then
		return x[1], x[2]
	end
	local s = math.floor(x / E9)
	local n = x - s * E9
	if n < 0 then
		s, n = s - 1, n + E9
	elseif n >= E9 then
		s, n = s + 1, n - E9
	end
	return s, n
end
N.wide = wide

function N.add(a, b)
	if type(a) == 'number' and type(b) == 'number' then
		local r = a + b
		if r > -MAX and r < MAX then
			return r
		end
	end
	local as, an = wide(a)
	local bs, bn = wide(b)
	return norm(as + bs, an + bn)
end

function N.sub(a, b)
	if type(a) == 'number' and type(b) == 'number' then
		local r = a - b
		if r > -MAX and r < MAX then
			return r
		end
	end
	local as, an = wide(a)
	local bs, bn = wide(b)
	return norm(as - bs, an - bn)
end

function N.lt(a, b)
	if type(a) == 'number' and type(b) == 'number' then
		return a < b
	end
	local as, an = wide(a)
	local bs, bn = wide(b)
	return as < bs or as == bs and an < bn
end

function N.le(a, b)
	return not N.lt(b, a)
end

function N.max(a, b)
	if N.lt(a, b) then
		return b
	end
	return a
end

function N.min(a, b)
	if N.lt(b, a) then
		return b
	end
	return a
end

-- mul returns a * k for an integer 0 <= k < 2^43 (a cost, a count), the
-- product being below 2^62 in magnitude.
function N.mul(a, k)
	if type(a) == 'number' then
		local r = a * k
		if r > -MAX and r < MAX then
			return r
		end
	end
	local s, n = wide(a)
	local kh = math.floor(k / 1048576)
	local kl = k - kh * 1048576
	local hi = n * kh -- < 2^53
	local q = math.floor(hi / E9)
	local r = hi - q * E9
	return norm(s * k + q * 1048576, n * kl + r * 1048576)
end

-- approx returns x as the nearest double.
local function approx(x)
	if type(x) == 'number' then
		return x
	end
	return x[1] * E9 + x[2]
end

-- divsmall returns q, r with a = q * c + r, 0 <= r < c, for a >= 0 and an
-- integer 0 < c < 2^41: long division in base 4096, so that no partial
-- remainder times the base reaches 2^53.
local function divsmall(a, c)
	local low = {} -- base-4096 digits below a's small high part, least significant first
	while type(a) ~= 'number' do
		-- a = s * 10^9 + n = 4096 * (sq * 10^9 + floor(t / 4096)) + t % 4096,
		-- where s = sq * 4096 + sr and t = sr * 10^9 + n.
		local s, n = a[1], a[2]
		local sq = math.floor(s / 4096)
		local t = (s - sq * 4096) * E9 + n
		local tq = math.floor(t / 4096)
		low[#low + 1] = t - tq * 4096
		a = norm(sq, tq)
	end
	local q = math.floor(a / c)
	local r = a - q * c
	if r < 0 then
		q, r = q - 1, r + c
	elseif r >= c then
		q, r = q + 1, r - c
	end
	for i = #low, 1, -1 do
		r = r * 4096 + low[i]
		local qd = math.floor(r / c)
		r = r - qd * c
		if r < 0 then
			qd, r = qd - 1, r + c
		elseif r >= c then
			qd, r = qd + 1, r - c
		end
		q = N.add(N.mul(q, 4096), qd)
	end
	return q, r
end

-- divmod returns q = floor(a / b) and r = a - q * b, for b > 0.
function N.divmod(a, b)
	if type(a) == 'number' and type(b) == 'number' then
		local q = math.floor(a / b)
		local r = a - q * b
		while r < 0 do
			q, r = q - 1, r + b
		end
		while r >= b do
			q, r = q + 1, r - b
		end
		return q, r
	end
	if N.lt(a, 0) then
		local q, r = N.divmod(N.sub(0, a), b)
		if N.lt(0, r) then
			return N.sub(N.sub(0, q), 1), N.sub(b, r)
		end
		return N.sub(0, q), 0
	end
	if type(b) == 'number' and b < 2199023255552 then -- 2^41
		return divsmall(a, b)
	end
	-- b >= 2^41 and a < 2^63: the quotient is below 2^22, and the double
	-- quotient is within a few units of it.
	local q = math.floor(approx(a) / approx(b))
	local r = N.sub(a, N.mul(b, q))
	while N.lt(r, 0) do
		q, r = q - 1, N.add(r, b)
	end
	while N.le(b, r) do
		q, r = q + 1, N.sub(r, b)
	end
	return q, r
end

-- fdiv returns floor(a / b) for b > 0; mod returns a mod p, in [0, p).
function N.fdiv(a, b)
	local q = N.divmod(a, b)
	return q
end

function N.mod(a, p)
	local _, r = N.divmod(a, p)
	return r
end

-- muldiv returns floor(a * b / c), or its ceiling when up is true, capped
-- at limit, for a count 0 <= a < 2^41 and b >= 0, c > 0 of any size:
-- a * floor(b / c), plus the rest computed bit by bit so that no partial
-- sum exceeds 2c.
function N.muldiv(a, b, c, limit, up)
	local base = 0
	if N.le(c, b) then
		local bq
		bq, b = N.divmod(b, c)
		base = N.mul(bq, a)
		if N.lt(limit, base) then
			return limit
		end
	end
	local bits = {}
	while a > 0 do
		local bit = a % 2
		bits[#bits + 1] = bit
		a = (a - bit) / 2
	end
	local p, r = 0, 0 -- prefix(a) * b = p * c + r, 0 <= r < c, p < a
	for i = #bits, 1, -1 do
		p, r = p * 2, N.add(r, r)
		if N.le(c, r) then
			p, r = p + 1, N.sub(r, c)
		end
		if bits[i] == 1 then
			r = N.add(r, b)
			if N.le(c, r) then
				p, r = p + 1, N.sub(r, c)
			end
		end
	end
	local q = N.add(base, p)
	if up and N.lt(0, r) then
		q = N.add(q, 1)
	end
	return N.min(q, limit)
end

-- parse reads a decimal integer, which may be wide.
function N.parse(v)
	local len = #v
	if len <= 15 then
		return tonumber(v)
	end
	local neg = string.sub(v, 1, 1) == '-'
	local s, n = tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
	if neg then
		return norm(s, -n)
	end
	return norm(s, n)
end

-- format writes x in decimal.
function N.format(x)
	if type(x) == 'number' then
		return string.format('%d', x)
	end
	local s, n = x[1], x[2]
	if s < 0 then
		-- -(|s| * 10^9 - n): negative wide values are spans, never stored
		-- as instants; written for completeness.
		s, n = -s - 1, E9 - n
		if n == E9 then
			s, n = s + 1, 0
		end
		return string.format('-%d%09d', s, n)
	end
	return string.format('%d%09d', s, n)
end

-- NS is N for limits whose every span is below 2^51 (a limit of under 26
-- days): the same functions on plain numbers, every value and every sum
-- the algorithms form staying below 2^53, so exact. A limit's parameters
-- name the module its algorithm computes with (p.N, algo.lua).
local NS = {}
N.small = NS

function NS.add(a, b)
	return a + b
end

function NS.sub(a, b)
	return a - b
end

function NS.lt(a, b)
	return a < b
end

function NS.le(a, b)
	return a <= b
end

function NS.max(a, b)
	if a < b then
		return b
	end
	return a
end

function NS.min(a, b)
	if b < a then
		return b
	end
	return a
end

function NS.mul(a, k)
	return a * k
end

function NS.fdiv(a, b)
	local q = math.floor(a / b)
	local r = a - q * b
	if r < 0 then
		q = q - 1
	elseif r >= b then
		q = q + 1
	end
	return q
end

function NS.divmod(a, b)
	local q = NS.fdiv(a, b)
	return q, a - q * b
end

function NS.mod(a, b)
	return a - NS.fdiv(a, b) * b
end

-- muldiv is N.muldiv on small numbers: a < 2^41, b and c below 2^51, so
-- that r + b < 2^53.
function NS.muldiv(a, b, c, limit, up)
	local base = 0
	if c <= b then
		local bq = NS.fdiv(b, c)
		if a * bq > limit then
			return limit
		end
		base, b = a * bq, b - bq * c
	end
	local p, r = 0, 0
	local bits = {}
	while a > 0 do
		local bit = a % 2
		bits[#bits + 1] = bit
		a = (a - bit) / 2
	end
	for i = #bits, 1, -1 do
		p, r = p * 2, r * 2
		if r >= c then
			p, r = p + 1, r - c
		end
		if bits[i] == 1 then
			r = r + b
			if r >= c then
				p, r = p + 1, r - c
			end
		end
	end
	local q = base + p
	if up and r > 0 then
		q = q + 1
	end
	if q > limit then
		return limit
	end
	return q
end
