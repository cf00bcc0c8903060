-- fixedwindow.lua: algo.FixedWindow. The stored word is Go's State.T, the
-- window's start plus count × unit; decoded, the state is {ws, count}: the
-- window's start relative to now, and its count.
A[FIXED_WINDOW] = {}

A[FIXED_WINDOW].decode = function(p, raw)
	local ws, m = T.window(p, raw)
	if ws == nil then
		return nil
	end
	return { ws = ws, count = fdiv(m, p.unit) }
end

A[FIXED_WINDOW].encode = function(p, st)
	return T.raw(p, st.ws + p.unit * st.count)
end

A[FIXED_WINDOW].check = function(p, st, cost, r)
	local rate = p.rate
	local shift, start = A.window(p, st)
	local count = 0
	if st ~= nil and st.ws == start then
		count = st.count
	end
	local reset = T.wend(p, start) - shift
	if cost > rate then
		if p.cd and count < p.top then
			st, count = { ws = start, count = p.top }, p.top
		end
		if count == 0 then
			reset = 0
		end
		never(r, rate - count, reset)
		return st
	end
	if count + cost > rate then
		if p.cd and cost > 0 and count < p.top then
			st, count = { ws = start, count = p.top }, p.top
		end
		result(r, false, max(rate - count, 0), reset, reset, 0)
		return st
	end
	count = count + cost
	if cost > 0 then
		st = { ws = start, count = count }
	end
	if count == 0 then
		reset = 0
	end
	result(r, true, rate - count, reset, 0, 0)
	return st
end

A[FIXED_WINDOW].refund = function(p, st, n)
	if st == nil then
		return st
	end
	local _, start = A.window(p, st)
	if st.ws ~= start or st.count == 0 then
		return st
	end
	return { ws = start, count = max(st.count - n, 0) }
end

-- charge is the window's debt (algo's chargeFixedWindow): the count rises
-- by n, saturating at a full window, top.
A[FIXED_WINDOW].charge = function(p, st, n)
	local _, start = A.window(p, st)
	local count = 0
	if st ~= nil and st.ws == start then
		count = st.count
	end
	return { ws = start, count = min(count + min(n, p.top), p.top) }
end

A[FIXED_WINDOW].expiry = function(p, st)
	if st == nil or st.count == 0 then
		return nil
	end
	return T.wend(p, st.ws)
end
