-- algo.lua: what the algorithms share — their table A, indexed by the
-- store's algorithm code, and a limit's parameters. Each algorithm, in a
-- file of its own, is the Lua twin of its Go definition in package algo,
-- on instants relative to now (time.lua) and exact integers (num.lua):
--
--   A[code].check(p, st, cost) -> st', allowed, remaining, reset-after,
--                                 retry-after (false: never), delay
--   A[code].refund(p, st, n) -> st' (A.refund bounds n first)
--   A[code].expiry(p, st) -> relative instant from which st is fresh (nil: now)
--
-- and, for the one-word algorithms, decode(p, raw) and encode(p, st)
-- between a state and the hash field that stores it (Go's algo.State,
-- written as decimal instants). A nil state is a fresh key. An algorithm
-- computes with p.N: num.lua's N, or its plain-number twin N.small for a
-- limit whose spans stay below 2^51 ns and a state near now (A.widen).

local A = {}

-- params reads a limit's definition: "algorithm rate burst period interval
-- unit pair flag", the numbers of Go's algo.Params (flag 1: shape, 2:
-- charge denied checks), durations in nanoseconds, of any size.
function A.params(def)
	local f = {}
	for w in string.gmatch(def, '%S+') do
		f[#f + 1] = w
	end
	local p = {
		alg = tonumber(f[1]),
		rate = tonumber(f[2]),
		burst = tonumber(f[3]),
		period = N.parse(f[4]),
		interval = N.parse(f[5]),
		unit = N.parse(f[6]),
		pair = N.parse(f[7]),
		shape = f[8] == '1',
		cd = f[8] == '2',
	}
	p.span = N.mul(p.interval, p.burst)
	p.top = p.rate
	if p.cd and (p.alg == 4 or p.alg == 6) then
		p.top = p.rate + 1 -- a denied check leaves a window's count at Rate+1
	end
	-- The farthest a state's expiry lies from now, in ms (a bucket's span,
	-- a fixed window's period, a sliding window counter's two), and the
	-- step of its TTLs (store.lua).
	local horizon = p.span
	if p.alg == 4 then
		horizon = p.period
	elseif p.alg == 6 then
		horizon = N.mul(p.period, 2)
	end
	p.step = math.max(60000, N.fdiv(horizon, 16000000))
	local small = 2251799813685248 -- 2^51
	p.N = N
	if type(p.period) == 'number' and p.period < small and type(p.span) == 'number' and p.span < small then
		p.N = N.small
	end
	return p
end

-- refund gives n units back to st, the state of a limit of parameters p,
-- and returns the new state: never more than two capacities' worth, which
-- no state holds more than (algo's Params.Refund).
function A.refund(p, st, n)
	local most = p.rate
	if p.alg <= 3 then
		most = p.burst
	end
	if p.cd then
		most = most + 1
	end
	return A[p.alg].refund(p, st, math.min(n, 2 * most))
end

-- The bucket algorithms' state: d, the stored instant minus now.
function A.decodeInstant(_, raw)
	return T.relRaw(raw)
end

function A.encodeInstant(_, d)
	return T.rawAt(d)
end

-- refundTime moves a bucket's instant back by n intervals, never before
-- now: a bucket cannot hold more than its capacity (algo's refundTime).
function A.refundTime(p, d, n)
	local N = p.N
	if d == nil or N.le(d, 0) then
		return d
	end
	return N.max(N.sub(d, N.mul(p.interval, n)), 0)
end

function A.expiryInstant(_, d)
	return d
end

-- bucket returns a new bucket algorithm's table, its check to add: the
-- state of the token bucket, GCRA and the leaky bucket is one instant.
function A.bucket()
	return { decode = A.decodeInstant, encode = A.encodeInstant, refund = A.refundTime, expiry = A.expiryInstant }
end

-- decodeWindow returns a stored window instant's window start relative to
-- now and its offset.
function A.decodeWindow(p, raw)
	return T.windowRaw(raw, p.period)
end

-- widen returns p, or for a limit of plain numbers whose state st holds a
-- value of 2^51 or more (written by a clock far ahead of or behind this
-- one), p's twin on wide numbers, so that every sum stays exact.
function A.widen(p, st)
	if p.N ~= N.small or st == nil then
		return p
	end
	local x = st
	if type(st) == 'table' and st.ws ~= nil then
		x = st.ws
	end
	if type(x) == 'number' and x > -2251799813685248 and x < 2251799813685248 then
		return p
	end
	if p.wide == nil then
		local w = {}
		for k, v in pairs(p) do
			w[k] = v
		end
		w.N = N
		p.wide = w
	end
	return p.wide
end
