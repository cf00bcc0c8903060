-- slidingwindowcounter.lua: algo.SlidingWindowCounter. The stored word is
-- Go's State: T alone when the two counts pack into it (pair > 0: start +
-- (prev × (top+1) + curr) × pair), else "T:N" (T = start + curr × unit, N
-- = prev). Decoded, the state is {ws, curr, prev}.
A[6] = {}

A[6].decode = function(p, raw)
	local N = p.N
	local i = string.find(raw, ':', 1, true)
	local t, prev = raw, 0
	if i then
		t, prev = string.sub(raw, 1, i - 1), tonumber(string.sub(raw, i + 1))
	end
	local ws, m = A.decodeWindow(p, t)
	if ws == nil then
		return nil
	end
	if N.lt(0, p.pair) then
		local pv, curr = N.divmod(N.fdiv(m, p.pair), p.top + 1)
		return { ws = ws, curr = curr, prev = pv }
	end
	return { ws = ws, curr = N.fdiv(m, p.unit), prev = prev }
end

A[6].encode = function(p, st)
	local N = p.N
	if N.lt(0, p.pair) then
		local packed = N.add(N.mul(N.mul(p.pair, p.top + 1), st.prev), N.mul(p.pair, st.curr))
		return T.rawAt(N.add(st.ws, packed))
	end
	return T.rawAt(N.add(st.ws, N.mul(p.unit, st.curr))) .. ':' .. string.format('%d', st.prev)
end

-- counts returns st's (curr, prev) for the window starting at start.
local function counts(p, st, start)
	if st == nil then
		return 0, 0
	end
	if A.same(p.N, st.ws, start) then
		return st.curr, st.prev
	elseif A.same(p.N, st.ws, p.N.sub(start, p.period)) then
		return 0, st.curr
	end
	return 0, 0
end

local function reset(p, start, now, curr, prev)
	local N = p.N
	if curr > 0 then
		return N.sub(N.add(start, N.mul(p.period, 2)), now)
	elseif prev > 0 then
		return N.sub(N.add(start, p.period), now)
	end
	return 0
end

-- retry is algo's slidingWindowRetry: later in this window if the previous
-- window's weight can fall far enough, otherwise in the next one.
local function retry(p, start, now, curr, prev, cost)
	local N = p.N
	local period = p.period
	local room = p.rate - curr - cost
	if room >= 0 and prev > 0 then
		local at = N.sub(period, N.muldiv(room, period, prev, period, false))
		if N.lt(at, period) then
			return N.max(N.sub(N.add(start, at), now), 0)
		end
	end
	room = p.rate - cost
	local at = 0
	if curr > room then
		at = N.sub(period, N.muldiv(room, period, curr, period, false))
	end
	return N.sub(N.add(N.add(start, period), at), now)
end

A[6].check = function(p, st, cost)
	local N = p.N
	local rate, period = p.rate, p.period
	local now, start = A.window(p, st)
	local curr, prev = counts(p, st, start)
	local weighted = N.muldiv(prev, N.sub(period, N.sub(now, start)), period, p.top, true)
	if cost > rate or weighted + curr + cost > rate then
		if p.cd and cost > 0 and curr < p.top then
			curr = math.min(curr + math.min(cost, p.top), p.top)
			st = { ws = start, curr = curr, prev = prev }
		end
		local rs = reset(p, start, now, curr, prev)
		if cost > rate then
			return st, false, math.max(rate - weighted - curr, 0), N.max(rs, 0), false, 0
		end
		return st, false, math.max(rate - weighted - curr, 0), rs, retry(p, start, now, curr, prev, cost), 0
	end
	curr = curr + cost
	if cost > 0 then
		st = { ws = start, curr = curr, prev = prev }
	end
	return st, true, rate - weighted - curr, reset(p, start, now, curr, prev), 0, 0
end

A[6].refund = function(p, st, n)
	if st == nil then
		return st
	end
	local _, start = A.window(p, st)
	local curr, prev = counts(p, st, start)
	if curr == 0 and prev == 0 then
		return st
	end
	local take = math.min(n, curr)
	return { ws = start, curr = curr - take, prev = math.max(prev - (n - take), 0) }
end

A[6].expiry = function(p, st)
	if st == nil then
		return nil
	end
	if st.curr > 0 then
		return p.N.add(st.ws, p.N.mul(p.period, 2))
	elseif st.prev > 0 then
		return p.N.add(st.ws, p.period)
	end
	return nil
end
