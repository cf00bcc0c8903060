-- algo.lua: what the algorithms share. Each algorithm, in a file of its
-- own, is the Lua twin of its Go definition in package algo. A limit
-- counts time in ticks (p.tick nanoseconds: algo's Params.Tick, 1 or
-- 1000), and a check sees every instant relative to now (time.lua), so
-- that every number it forms stays below 2^53 and plain Lua numbers,
-- doubles, are exact integers (docs/redis.md).
--
-- The algorithms' codes, as redisstore's algorithmCode sends them:
local TOKEN_BUCKET, GCRA, LEAKY_BUCKET, FIXED_WINDOW = 1, 2, 3, 4
local SLIDING_WINDOW_LOG, SLIDING_WINDOW_COUNTER, CONCURRENCY = 5, 6, 7

-- A[code] is an algorithm's table:
--
--   check(p, st, cost, r) -> st': decides a check of cost on the state st
--     under the limit of parameters p, fills in the result table r
--     (allowed, remaining, reset, retry — false: never — and delay,
--     durations in ticks), and returns the new state (st itself when the
--     check changes nothing)
--   refund(p, st, n) -> st'
--   charge(p, st, n) -> st': takes n units whatever st holds, past the
--     capacity if need be (a debt; algo's Params.Charge); not for
--     concurrency or a shaping leaky bucket
--   expiry(p, st) -> ticks from now until st is fresh (nil: it is)
--
-- and, for the one-word algorithms, decode(p, raw) and encode(p, st)
-- between a state and the hash field that stores it (Go's algo.State,
-- written as decimal nanoseconds). A nil state is a fresh key, and so is
-- a word more than FAR ticks ahead of now (algo.Far: only a clock that
-- jumped by weeks writes one).
local A = {}

-- params reads a limit's definition: "algorithm rate burst tick period
-- interval unit pair flag", the numbers of Go's algo.Params (flag 1:
-- shape, 2: charge denied checks), durations in ticks; a calendar limit's
-- then goes on with four instants (decimal ns), the starts of the window
-- before Go's clock's, of its window, and of the two after (time.lua's
-- T.cal): period is then the longest window, and unit packs a count into
-- the shortest.
function A.params(def)
	local f, words = {}, {}
	for w in string.gmatch(def, '%S+') do
		words[#words + 1] = w
		f[#f + 1] = tonumber(w)
	end
	local p = {
		alg = f[1],
		rate = f[2],
		burst = f[3],
		tick = f[4],
		period = f[5],
		interval = f[6],
		unit = f[7],
		pair = f[8],
		shape = f[9] == 1,
		cd = f[9] == 2,
	}
	if #words >= 13 then
		p.cal = { words[10], words[11], words[12], words[13] }
	end
	p.span = p.interval * p.burst
	-- How far ahead a bucket's debt reaches, in ticks (algo's MaxDebt):
	-- FAR, or floor(2^60 / 1000) microseconds.
	p.debt = FAR
	if p.tick ~= 1 then
		p.debt = 1152921504606846
	end
	p.top = p.rate
	if p.cd and (p.alg == FIXED_WINDOW or p.alg == SLIDING_WINDOW_COUNTER) then
		p.top = p.rate + 1 -- a denied check leaves a window's count at Rate+1
	end
	p.ms = 1000000 / p.tick -- ticks in a millisecond
	p.idle = -60000 * p.ms -- a minute before now (store.lua)
	-- The farthest a state's expiry lies from now (a bucket's span, a
	-- window's period, a sliding window counter's two), and the step of
	-- its TTLs in ms (store.lua): a sixteenth of it, at least a minute.
	local horizon = p.span
	if p.alg == FIXED_WINDOW then
		horizon = p.period
	elseif p.alg == SLIDING_WINDOW_COUNTER then
		horizon = 2 * p.period
	end
	p.step = max(60000, fdiv(horizon, 16 * p.ms))
	return p
end

-- Division: floor(a / b) of doubles is exact for integers a, b > 0 with
-- |a| + b < 2^53 — the quotient cannot round across an integer — which
-- every division of a check's values is (they stay below 2^52 + 2^51);
-- fdiv (time.lua) corrects the quotient where that is not known.

-- result fills in the result table r.
local function result(r, allowed, remaining, reset, retry, delay)
	r.allowed, r.remaining, r.reset, r.retry, r.delay = allowed, remaining, reset, retry, delay
end

-- never is a check that costs more than the capacity.
local function never(r, remaining, reset)
	r.allowed, r.remaining, r.reset, r.retry, r.delay = false, max(remaining, 0), max(reset, 0), false, 0
end

-- refund gives n units back to st, the state of a limit of parameters p,
-- and returns the new state (algo's Params.Refund).
function A.refund(p, st, n)
	return A[p.alg].refund(p, st, n)
end

-- refundTime moves a bucket's instant back by n intervals, never before
-- now: a bucket cannot hold more than its capacity (algo's refundTime).
-- A product past 2^53 is inexact, but then past d too: the result is 0.
local function refundTime(p, d, n)
	if d == nil or d <= 0 then
		return d
	end
	return max(d - p.interval * n, 0)
end

-- chargeTime is the buckets' debt (algo's chargeTime): the instant moves n
-- intervals past max(d, now), stopping at p.debt ticks ahead (algo's
-- MaxDebt).
local function chargeTime(p, d, n)
	local t = 0
	if d ~= nil and d > 0 then
		t = d
	end
	if n > floor((p.debt - t) / p.interval) then
		return max(t, p.debt)
	end
	return t + p.interval * n
end

local function expiryInstant(_, d)
	return d
end

-- bucket returns a new bucket algorithm's table, its check to add: the
-- state of the token bucket, GCRA and the leaky bucket is one instant,
-- d, the stored instant minus now, which is also its expiry (instant).
function A.bucket()
	return { decode = T.word, encode = T.raw, refund = refundTime, charge = chargeTime, expiry = expiryInstant, instant = true }
end

-- window returns how far now moves forward — to the start of a state's
-- window that lies ahead, written by a clock ahead of this one (algo's
-- notBeforeWindow) — and the start of the window a check works in, both
-- relative to now.
function A.window(p, st)
	if st ~= nil and st.ws > 0 then
		return st.ws, st.ws
	end
	return 0, -T.offset(p)
end
