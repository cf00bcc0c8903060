-- check.lua: one Bouncer check (or refund) of several limits, all or
-- nothing, in one call. The algorithms are those of the Go package algo,
-- computing the same integers: see docs/redis.md for the arithmetic.
--
-- KEYS: the Redis keys the limits use, each once. A one-word limit (token
--   bucket, GCRA, leaky bucket, fixed window, sliding window counter) keeps
--   its state in a field of a hash shared by the keys of one bucket; a log
--   limit (sliding window log, concurrency) keeps its own string key.
-- ARGV[1]: "" to read the time with TIME, or a pinned time in Unix
--   nanoseconds (tests only).
-- ARGV[2]: cost (a non-negative integer).
-- ARGV[3]: "c" to check, "r" to refund cost.
-- ARGV[4]: L, the number of limits; then 10 arguments per limit:
--   key index (into KEYS), hash field ("" for a log key), algorithm
--   (1 token bucket, 2 GCRA, 3 leaky bucket, 4 fixed window, 5 sliding
--   window log, 6 sliding window counter, 7 concurrency), rate, burst,
--   period, interval, unit, pair (see algo.Params), shape (0 or 1).
--   Durations are in nanoseconds, each below 2^52.
-- Reply: for a check, 1 if every limit allows (and the cost was charged)
--   else 0, then 5 integers per limit: allows (1 or 0; when the check is
--   denied, a limit that would have allowed reports itself peeked at with
--   cost 0), remaining, reset-after, retry-after (-1: never), delay; in
--   nanoseconds. For a refund, the integer 0.

local E9 = 1000000000
local BIG = 9007199254740992 -- 2^53: "further than any span"

-- Instants are pairs (s, n): seconds and nanoseconds, 0 <= n < 1e9, so
-- that a double holds each part exactly.

local function parse(v)
	local len = #v
	if len <= 9 then
		return 0, tonumber(v)
	end
	return tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
end

local function fmt(s, n)
	if s == 0 then
		return string.format('%d', n)
	end
	return string.format('%d%09d', s, n)
end

-- diff returns a - b in nanoseconds, exact below 2^53 and clamped to
-- +-BIG beyond.
local function diff(as, an, bs, bn)
	local ds = as - bs
	if ds > 9000000 then
		return BIG
	elseif ds < -9000000 then
		return -BIG
	end
	return ds * E9 + (an - bn)
end

-- add returns a + d for an integer d with |d| < 2^53.
local function add(as, an, d)
	local ds = math.floor(d / E9)
	local n = an + (d - ds * E9)
	local s = as + ds
	while n >= E9 do
		n = n - E9
		s = s + 1
	end
	while n < 0 do
		n = n + E9
		s = s - 1
	end
	return s, n
end

-- fdiv is floor(a / b) for integers below 2^53, b > 0, corrected for the
-- rounding of the double quotient.
local function fdiv(a, b)
	local q = math.floor(a / b)
	local r = a - q * b
	while r < 0 do
		q = q - 1
		r = r + b
	end
	while r >= b do
		q = q + 1
		r = r - b
	end
	return q
end

local function fmod(a, b)
	return a - fdiv(a, b) * b
end

-- mulmod is (a * b) mod m for 0 <= a, b < m < 2^52, by doubling.
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

-- muldiv is floor (or, with up, ceil) of a * b / c, capped at limit, for
-- integers 0 <= a, b < 2^53, 0 < c < 2^52 and limit < 2^52.
local function muldiv(a, b, c, limit, up)
	local q = 0
	local bq = fdiv(b, c)
	if bq > 0 and a > 0 then
		if a * bq > limit then
			return limit
		end
		q = a * bq
		b = b - bq * c
	end
	local bits = {}
	while a > 0 do
		local bit = a % 2
		bits[#bits + 1] = bit
		a = (a - bit) / 2
	end
	local p, r = 0, 0 -- prefix(a) * b = p * c + r, r < c
	for i = #bits, 1, -1 do
		p = p * 2
		r = r * 2
		if r >= c then
			p = p + 1
			r = r - c
		end
		if bits[i] == 1 then
			r = r + b
			if r >= c then
				p = p + 1
				r = r - c
			end
		end
		if q + p > limit then
			return limit
		end
	end
	q = q + p
	if up and r > 0 then
		q = q + 1
	end
	if q > limit then
		return limit
	end
	return q
end

-- wmod is (s, n) mod period: the time since the start of the window.
local function wmod(s, n, period)
	if fmod(period, E9) == 0 then
		return fmod(s, period / E9) * E9 + n
	elseif fmod(E9, period) == 0 then
		return fmod(n, period)
	end
	return fmod(mulmod(fmod(s, period), fmod(E9, period), period) + n, period)
end

-- Time, cost and mode.
local ns, nn
local pinned = ARGV[1] ~= ''
if pinned then
	ns, nn = parse(ARGV[1])
else
	local t = redis.call('TIME')
	ns, nn = tonumber(t[1]), tonumber(t[2]) * 1000
end
local cost = tonumber(ARGV[2])
local refund = ARGV[3] == 'r'
local L = tonumber(ARGV[4])

-- A limit: its parameters and, while deciding, its state relative to now.
local function limitAt(i)
	local b = 4 + (i - 1) * 10
	return {
		key = KEYS[tonumber(ARGV[b + 1])],
		field = ARGV[b + 2],
		algo = tonumber(ARGV[b + 3]),
		rate = tonumber(ARGV[b + 4]),
		burst = tonumber(ARGV[b + 5]),
		period = tonumber(ARGV[b + 6]),
		interval = tonumber(ARGV[b + 7]),
		unit = tonumber(ARGV[b + 8]),
		pair = tonumber(ARGV[b + 9]),
		shape = ARGV[b + 10] == '1',
	}
end

local function never(remaining, reset)
	return { false, math.max(remaining, 0), math.max(reset, 0), -1, 0 }
end

-- States. A one-word state is an instant (s, n), or nil when fresh; the
-- two-word sliding window counter adds count c2. A log is a list of
-- entries {s, n, count}.

local function isLog(l)
	return l.algo == 5 or l.algo == 7
end

local function load(l)
	if isLog(l) then
		local v = redis.call('GET', l.key)
		local log = {}
		if v then
			for at, c in string.gmatch(v, '(%d+):(%d+)') do
				local s, n = parse(at)
				log[#log + 1] = { s, n, tonumber(c) }
			end
		end
		return { log = log }
	end
	local v = redis.call('HGET', l.key, l.field)
	if not v then
		return {}
	end
	local t, c2 = string.match(v, '^(%d+):(%d+)$')
	if t then
		local s, n = parse(t)
		return { s = s, n = n, c2 = tonumber(c2) }
	end
	local s, n = parse(v)
	return { s = s, n = n }
end

-- rel is a one-word state's instant minus now (-BIG when fresh).
local function rel(st)
	if not st.s then
		return -BIG
	end
	return diff(st.s, st.n, ns, nn)
end

local function at(d)
	local s, n = add(ns, nn, d)
	return { s = s, n = n }
end

-- The bucket algorithms: the state is an instant t; d = t - now.

local function tokenBucket(l, st, c)
	local interval, full = l.interval, l.burst * l.interval
	local credit = full - math.max(0, rel(st))
	if c > l.burst then
		return st, never(fdiv(credit, interval), full - credit)
	end
	local need = c * interval
	if need > credit then
		return st, { false, math.max(fdiv(credit, interval), 0), full - credit, need - credit, 0 }
	end
	credit = credit - need
	if c > 0 then
		st = at(full - credit)
	end
	return st, { true, fdiv(credit, interval), full - credit, 0, 0 }
end

local function gcra(l, st, c)
	local interval, capacity = l.interval, l.burst * l.interval
	local tat = math.max(rel(st), 0)
	if c > l.burst then
		return st, never(fdiv(capacity - tat, interval), tat)
	end
	local nxt = tat + c * interval
	local over = nxt - capacity
	if over > 0 then
		return st, { false, math.max(fdiv(capacity - tat, interval), 0), tat, over, 0 }
	end
	if c > 0 then
		st = at(nxt)
	end
	return st, { true, math.max(fdiv(capacity - nxt, interval), 0), nxt, 0, 0 }
end

local function leakyBucket(l, st, c)
	local interval, depth = l.interval, l.burst * l.interval
	local level = math.max(0, rel(st))
	if c > l.burst then
		return st, never(fdiv(depth - level, interval), level)
	end
	local over = level + c * interval - depth
	if over > 0 then
		return st, { false, math.max(fdiv(depth - level, interval), 0), level, over, 0 }
	end
	local delay = 0
	if l.shape and c > 0 then
		delay = level
	end
	level = level + c * interval
	if c > 0 then
		st = at(level)
	end
	return st, { true, fdiv(depth - level, interval), level, 0, delay }
end

local function refundTime(l, st, c)
	local d = rel(st)
	if d <= 0 then
		return st
	end
	return at(math.max(d - c * l.interval, 0))
end

-- The window algorithms. Times are relative to now: a window's start is
-- -e, e being the time since it started. A stored state's window start is
-- found from its own instant.

-- window returns the start of the window of st's instant relative to now
-- (nil when fresh) and the offset of st's instant in that window.
local function window(l, st)
	if not st.s then
		return nil, 0
	end
	local m = wmod(st.s, st.n, l.period)
	return rel(st) - m, m
end

-- startOf returns, relative to now, the start of the window that holds
-- now + shift. A check moves now up to its stored window's start (shift
-- > 0) if the clock stepped back, as algo's notBeforeWindow does.
local function startOf(l, shift)
	local s, n = add(ns, nn, shift)
	return shift - wmod(s, n, l.period) -- the window start relative to now
end

local function fixedWindow(l, st, c)
	local rate, period = l.rate, l.period
	local ws, m = window(l, st)
	local shift = 0
	if ws and ws > 0 then
		shift = ws
	end
	local start = startOf(l, shift)
	local count = 0
	if ws == start then
		count = fdiv(m, l.unit)
	end
	local reset = start + period - shift
	if c > rate then
		if count == 0 then
			reset = 0
		end
		return st, never(rate - count, reset)
	end
	if count + c > rate then
		return st, { false, math.max(rate - count, 0), reset, reset, 0 }
	end
	count = count + c
	if c > 0 then
		st = at(start + count * l.unit)
	end
	if count == 0 then
		reset = 0
	end
	return st, { true, rate - count, reset, 0, 0 }
end

local function refundFixedWindow(l, st, c)
	local ws, m = window(l, st)
	if not ws then
		return st
	end
	local start = startOf(l, math.max(ws, 0))
	if ws ~= start then
		return st
	end
	local count = fdiv(m, l.unit)
	if count == 0 then
		return st
	end
	return at(start + math.max(count - c, 0) * l.unit)
end

-- counts returns a sliding window counter's (curr, prev) for the window
-- starting at start, from st whose window starts at ws with offset m.
local function counts(l, st, ws, m, start)
	if not ws then
		return 0, 0
	end
	local c, pv
	if l.pair > 0 then
		local x = fdiv(m, l.pair)
		c, pv = fmod(x, l.rate + 1), fdiv(x, l.rate + 1)
	else
		c, pv = fdiv(m, l.unit), st.c2 or 0
	end
	if ws == start then
		return c, pv
	elseif ws == start - l.period then
		return 0, c
	end
	return 0, 0
end

local function swcState(l, start, curr, prev)
	if l.pair > 0 then
		return at(start + (prev * (l.rate + 1) + curr) * l.pair)
	end
	local st = at(start + curr * l.unit)
	st.c2 = prev
	return st
end

local function swcReset(start, period, shift, curr, prev)
	if curr > 0 then
		return start + 2 * period - shift
	elseif prev > 0 then
		return start + period - shift
	end
	return 0
end

local function slidingWindowCounter(l, st, c)
	local rate, period = l.rate, l.period
	local ws, m = window(l, st)
	local shift = 0
	if ws and ws > 0 then
		shift = ws
	end
	local start = startOf(l, shift)
	local curr, prev = counts(l, st, ws, m, start)
	local elapsed = shift - start
	local weighted = muldiv(prev, period - elapsed, period, rate, true)
	local reset = swcReset(start, period, shift, curr, prev)
	if c > rate then
		return st, never(rate - weighted - curr, reset)
	end
	if weighted + curr + c > rate then
		-- retry: see algo's slidingWindowRetry, in time since the window's start.
		local retry
		local room = rate - curr - c
		if room >= 0 and prev > 0 then
			local a = period - muldiv(room, period, prev, period, false)
			if a < period then
				retry = math.max(a - elapsed, 0)
			end
		end
		if not retry then
			room = rate - c
			local a = 0
			if curr > room then
				a = period - muldiv(room, period, curr, period, false)
			end
			retry = period + a - elapsed
		end
		return st, { false, math.max(rate - weighted - curr, 0), reset, retry, 0 }
	end
	curr = curr + c
	if c > 0 then
		st = swcState(l, start, curr, prev)
	end
	return st, { true, rate - weighted - curr, swcReset(start, period, shift, curr, prev), 0, 0 }
end

local function refundSlidingWindowCounter(l, st, c)
	local ws, m = window(l, st)
	if not ws then
		return st
	end
	local start = startOf(l, math.max(ws, 0))
	local curr, prev = counts(l, st, ws, m, start)
	if curr == 0 and prev == 0 then
		return st
	end
	local take = math.min(c, curr)
	curr = curr - take
	prev = math.max(prev - (c - take), 0)
	return swcState(l, start, curr, prev)
end

-- The log algorithms: entries {s, n, count} in order of their instants.

local function dropThrough(log, d) -- drop entries at or before now + d
	local out = {}
	for _, e in ipairs(log) do
		if diff(e[1], e[2], ns, nn) > d then
			out[#out + 1] = e
		end
	end
	return out
end

local function sum(log)
	local total = 0
	for _, e in ipairs(log) do
		total = total + e[3]
	end
	return total
end

-- freedAt returns, relative to now, the instant by which count units of
-- the log have left it.
local function freedAt(log, count)
	for _, e in ipairs(log) do
		count = count - e[3]
		if count <= 0 then
			return diff(e[1], e[2], ns, nn)
		end
	end
	if #log == 0 then
		return -BIG
	end
	local e = log[#log]
	return diff(e[1], e[2], ns, nn)
end

local function append(log, d, count)
	local s, n = add(ns, nn, d)
	local last = log[#log]
	if last and diff(last[1], last[2], s, n) > 0 then
		s, n = last[1], last[2]
	end
	log[#log + 1] = { s, n, count }
end

local function lastRel(log)
	local e = log[#log]
	return diff(e[1], e[2], ns, nn)
end

local function slidingWindowLog(l, st, c)
	local rate, period = l.rate, l.period
	local log = dropThrough(st.log, -period)
	local used = sum(log)
	local reset = 0
	if #log > 0 then
		reset = lastRel(log) + period
	end
	if c > rate then
		return { log = log }, never(rate - used, reset)
	end
	local over = used + c - rate
	if over > 0 then
		return { log = log }, { false, math.max(rate - used, 0), reset, math.max(freedAt(log, over) + period, 0), 0 }
	end
	if c > 0 then
		append(log, 0, c)
		reset = math.max(reset, period)
	end
	return { log = log }, { true, rate - used - c, reset, 0, 0 }
end

local function concurrency(l, st, c)
	local rate, period = l.rate, l.period
	local log = dropThrough(st.log, 0)
	local active = sum(log)
	local reset = 0
	if #log > 0 then
		reset = lastRel(log)
	end
	if c > rate then
		return { log = log }, never(rate - active, reset)
	end
	local over = active + c - rate
	if over > 0 then
		return { log = log }, { false, math.max(rate - active, 0), reset, math.max(freedAt(log, over), 0), 0 }
	end
	if c > 0 then
		append(log, period, c)
		reset = lastRel(log)
	end
	return { log = log }, { true, rate - active - c, reset, 0, 0 }
end

local function refundLog(l, st, c)
	local log
	if l.algo == 5 then
		log = dropThrough(st.log, -l.period)
		while c > 0 and #log > 0 do -- the newest first
			local e = log[#log]
			local take = math.min(c, e[3])
			e[3] = e[3] - take
			c = c - take
			if e[3] == 0 then
				log[#log] = nil
			end
		end
		return { log = log }
	end
	log = dropThrough(st.log, 0)
	local out = {}
	for _, e in ipairs(log) do -- the oldest first
		local take = math.min(c, e[3])
		c = c - take
		if e[3] > take then
			out[#out + 1] = { e[1], e[2], e[3] - take }
		end
	end
	return { log = out }
end

-- expiry returns, relative to now, the instant from which st equals a
-- fresh state (<= 0: it does now).
local function expiry(l, st)
	if isLog(l) then
		if #st.log == 0 then
			return -BIG
		end
		if l.algo == 5 then
			return lastRel(st.log) + l.period
		end
		return lastRel(st.log)
	end
	if not st.s then
		return -BIG
	end
	if l.algo <= 3 then
		return rel(st)
	end
	local ws, m = window(l, st)
	if l.algo == 4 then
		if fdiv(m, l.unit) == 0 then
			return -BIG
		end
		return ws + l.period
	end
	local curr, prev = counts(l, st, ws, m, ws)
	if curr > 0 then
		return ws + 2 * l.period
	elseif prev > 0 then
		return ws + l.period
	end
	return -BIG
end

local checks = { tokenBucket, gcra, leakyBucket, fixedWindow, slidingWindowLog, slidingWindowCounter, concurrency }

local function refundOf(l, st, c)
	if l.algo <= 3 then
		return refundTime(l, st, c)
	elseif l.algo == 4 then
		return refundFixedWindow(l, st, c)
	elseif l.algo == 6 then
		return refundSlidingWindowCounter(l, st, c)
	end
	return refundLog(l, st, c)
end

-- save stores st for l, or deletes it once it is fresh, and keeps the
-- key's TTL at least until st expires.
local function save(l, st)
	local e = expiry(l, st)
	if e <= 0 then
		if isLog(l) then
			redis.call('DEL', l.key)
		else
			redis.call('HDEL', l.key, l.field)
		end
		return
	end
	local ttl = math.floor(e / 1000000) + 1
	if pinned then
		-- Redis expires keys on its own clock, which a pinned time does
		-- not drive: keep them for the test instead.
		ttl = math.max(ttl, 600000)
	end
	if isLog(l) then
		local parts = {}
		for i, x in ipairs(st.log) do
			parts[i] = fmt(x[1], x[2]) .. ':' .. string.format('%d', x[3])
		end
		redis.call('SET', l.key, table.concat(parts, ','), 'PX', ttl)
		return
	end
	local v = fmt(st.s, st.n)
	if st.c2 then
		v = v .. ':' .. string.format('%d', st.c2)
	end
	if redis.call('HSET', l.key, l.field, v) == 1 then
		-- A new field: forget up to two fresh ones of the same limit.
		local sample = redis.call('HRANDFIELD', l.key, 2, 'WITHVALUES')
		for i = 1, #sample, 2 do
			if sample[i] ~= l.field then
				local other = { field = sample[i] }
				local t, c2 = string.match(sample[i + 1], '^(%d+):(%d+)$')
				if not t then
					t = sample[i + 1]
				end
				other.s, other.n = parse(t)
				other.c2 = tonumber(c2)
				if expiry(l, other) <= 0 then
					redis.call('HDEL', l.key, sample[i])
				end
			end
		end
	end
	if redis.call('PEXPIRE', l.key, ttl, 'GT') == 0 then
		redis.call('PEXPIRE', l.key, ttl, 'NX')
	end
end

-- Decide every limit; the same key and limit twice is charged twice.
local limits, states, orig, results = {}, {}, {}, {}
local allowed = true
for i = 1, L do
	local l = limitAt(i)
	local id = l.key .. '\0' .. l.field
	local st = states[id]
	if not st then
		st = load(l)
		orig[id] = st
	end
	limits[i] = l
	if refund then
		-- No state holds more than two capacities' worth of units.
		local capacity = l.rate
		if l.algo <= 3 then
			capacity = l.burst
		end
		states[id] = refundOf(l, st, math.min(cost, 2 * capacity))
	else
		local nst, res = checks[l.algo](l, st, cost)
		states[id] = nst
		results[i] = { id, res }
		allowed = allowed and res[1]
	end
end

if refund then
	local done = {}
	for i = 1, L do
		local l = limits[i]
		local id = l.key .. '\0' .. l.field
		if not done[id] then
			done[id] = true
			save(l, states[id])
		end
	end
	return 0
end

if allowed and cost > 0 then
	local done = {}
	for i = L, 1, -1 do
		local l = limits[i]
		local id = results[i][1]
		if not done[id] then
			done[id] = true
			save(l, states[id])
		end
	end
end

local reply = { 0 }
if allowed then
	reply[1] = 1
end
for i = 1, L do
	local res = results[i][2]
	if not allowed and res[1] then
		-- Nothing is charged: a limit that would have allowed reports
		-- itself as it stands, peeked at with cost 0.
		local _, peek = checks[limits[i].algo](limits[i], orig[results[i][1]], 0)
		res = peek
	end
	local ok = 0
	if res[1] then
		ok = 1
	end
	reply[#reply + 1] = ok
	reply[#reply + 1] = res[2]
	reply[#reply + 1] = res[3]
	reply[#reply + 1] = res[4]
	reply[#reply + 1] = res[5]
end
return reply
