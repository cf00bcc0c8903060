-- fixedwindow.lua: algo.FixedWindow. The stored word is Go's State.T, the
-- window's start plus count × unit; decoded, the state is {ws, count}: the
-- window's start relative to now, and its count.
A[4] = {}

A[4].decode = function(p, raw)
	local ws, m = A.decodeWindow(p, raw)
	if ws == nil then
		return nil
	end
	return { ws = ws, count = p.N.fdiv(m, p.unit) }
end

A[4].encode = function(p, st)
	return T.rawAt(p.N.add(st.ws, p.N.mul(p.unit, st.count)))
end

-- window returns how far now moves forward — to the start of a state's
-- window that lies ahead, written by a clock ahead of this one (algo's
-- notBeforeWindow) — and the start of the window a check works in.
function A.window(p, st)
	local shift = 0
	if st ~= nil and p.N.lt(0, st.ws) then
		shift = st.ws
	end
	return shift, T.startOf(shift, p.period)
end

local function same(N, a, b)
	return N.le(a, b) and N.le(b, a)
end
A.same = same

A[4].check = function(p, st, cost)
	local N = p.N
	local rate, period = p.rate, p.period
	local shift, start = A.window(p, st)
	local count = 0
	if st ~= nil and same(N, st.ws, start) then
		count = st.count
	end
	local reset = N.sub(N.add(start, period), shift)
	if cost > rate then
		if p.cd and count < p.top then
			st, count = { ws = start, count = p.top }, p.top
		end
		if count == 0 then
			reset = 0
		end
		return st, false, math.max(rate - count, 0), N.max(reset, 0), false, 0
	end
	if count + cost > rate then
		if p.cd and cost > 0 and count < p.top then
			st, count = { ws = start, count = p.top }, p.top
		end
		return st, false, math.max(rate - count, 0), reset, reset, 0
	end
	count = count + cost
	if cost > 0 then
		st = { ws = start, count = count }
	end
	if count == 0 then
		reset = 0
	end
	return st, true, rate - count, reset, 0, 0
end

A[4].refund = function(p, st, n)
	if st == nil then
		return st
	end
	local _, start = A.window(p, st)
	if not same(p.N, st.ws, start) or st.count == 0 then
		return st
	end
	return { ws = start, count = math.max(st.count - n, 0) }
end

A[4].expiry = function(p, st)
	if st == nil or st.count == 0 then
		return nil
	end
	return p.N.add(st.ws, p.period)
end
