-- slidingwindowcounter.lua: algo.SlidingWindowCounter. The stored word is
-- Go's State: T alone when the two counts pack into it (pair > 0: start +
-- (prev × (top+1) + curr) × pair), else "T:N" (T = start + curr × unit, N
-- = prev). Decoded, the state is {ws, curr, prev}.
A[SLIDING_WINDOW_COUNTER] = {}

A[SLIDING_WINDOW_COUNTER].decode = function(p, raw)
	local i = string.find(raw, ':', 1, true)
	local t, prev = raw, 0
	if i then
		t, prev = string.sub(raw, 1, i - 1), tonumber(string.sub(raw, i + 1))
	end
	local ws, m = T.window(p, t)
	if ws == nil then
		return nil
	end
	if p.pair > 0 then
		local packed = fdiv(m, p.pair)
		local pv = fdiv(packed, p.top + 1)
		return { ws = ws, curr = packed - pv * (p.top + 1), prev = pv }
	end
	return { ws = ws, curr = fdiv(m, p.unit), prev = prev }
end

A[SLIDING_WINDOW_COUNTER].encode = function(p, st)
	if p.pair > 0 then
		return T.raw(p, st.ws + (st.prev * (p.top + 1) + st.curr) * p.pair)
	end
	return T.raw(p, st.ws + p.unit * st.curr) .. ':' .. string.format('%d', st.prev)
end

-- muldiv returns floor(a × b / c), or its ceiling when up is true, capped
-- at limit, for a count 0 <= a < 2^41 and 0 <= b, 0 < c below 2^51: at
-- once when a × b is below 2^53, else a × floor(b / c) plus the rest
-- computed bit by bit, so that no partial sum exceeds 2c.
local function muldiv(a, b, c, limit, up)
	local ab = a * b
	if ab < 9007199254740992 then
		local q = fdiv(ab, c)
		if up and q * c < ab then
			q = q + 1
		end
		return min(q, limit)
	end
	local base = 0
	if c <= b then
		local bq = fdiv(b, c)
		if a * bq > limit then
			return limit
		end
		base, b = a * bq, b - bq * c
	end
	local bits = {}
	while a > 0 do
		local bit = a % 2
		bits[#bits + 1] = bit
		a = (a - bit) / 2
	end
	local q, r = 0, 0 -- prefix(a) × b = q × c + r, 0 <= r < c
	for i = #bits, 1, -1 do
		q, r = q * 2, r * 2
		if r >= c then
			q, r = q + 1, r - c
		end
		if bits[i] == 1 then
			r = r + b
			if r >= c then
				q, r = q + 1, r - c
			end
		end
	end
	q = base + q
	if up and r > 0 then
		q = q + 1
	end
	return min(q, limit)
end

-- counts returns st's (curr, prev) for the window starting at start.
local function counts(p, st, start)
	if st == nil then
		return 0, 0
	end
	if st.ws == start then
		return st.curr, st.prev
	elseif st.ws == start - p.period then
		return 0, st.curr
	end
	return 0, 0
end

-- reset is until both counts have aged out, e ticks into the window.
local function reset(p, e, curr, prev)
	if curr > 0 then
		return 2 * p.period - e
	elseif prev > 0 then
		return p.period - e
	end
	return 0
end

-- retry is algo's slidingWindowRetry, e ticks into the window: later in
-- this window if the previous window's weight can fall far enough,
-- otherwise in the next one.
local function retry(p, e, curr, prev, cost)
	local period = p.period
	local room = p.rate - curr - cost
	if room >= 0 and prev > 0 then
		local at = period - muldiv(room, period, prev, period, false)
		if at < period then
			return max(at - e, 0)
		end
	end
	room = p.rate - cost
	local at = 0
	if curr > room then
		at = period - muldiv(room, period, curr, period, false)
	end
	return period + at - e
end

A[SLIDING_WINDOW_COUNTER].check = function(p, st, cost, r)
	local rate, period = p.rate, p.period
	local now, start = A.window(p, st)
	local e = now - start
	local curr, prev = counts(p, st, start)
	local weighted = muldiv(prev, period - e, period, p.top, true)
	if cost > rate or weighted + curr + cost > rate then
		if p.cd and cost > 0 and curr < p.top then
			curr = min(curr + min(cost, p.top), p.top)
			st = { ws = start, curr = curr, prev = prev }
		end
		if cost > rate then
			never(r, rate - weighted - curr, reset(p, e, curr, prev))
			return st
		end
		result(r, false, max(rate - weighted - curr, 0), reset(p, e, curr, prev), retry(p, e, curr, prev, cost), 0)
		return st
	end
	curr = curr + cost
	if cost > 0 then
		st = { ws = start, curr = curr, prev = prev }
	end
	result(r, true, rate - weighted - curr, reset(p, e, curr, prev), 0, 0)
	return st
end

A[SLIDING_WINDOW_COUNTER].refund = function(p, st, n)
	if st == nil then
		return st
	end
	local _, start = A.window(p, st)
	local curr, prev = counts(p, st, start)
	if curr == 0 and prev == 0 then
		return st
	end
	local take = min(n, curr)
	return { ws = start, curr = curr - take, prev = max(prev - (n - take), 0) }
end

-- charge is the counter's debt (algo's chargeSlidingWindowCounter): the
-- current window's count rises by n, saturating at a full window, top.
A[SLIDING_WINDOW_COUNTER].charge = function(p, st, n)
	local _, start = A.window(p, st)
	local curr, prev = counts(p, st, start)
	return { ws = start, curr = min(curr + min(n, p.top), p.top), prev = prev }
end

A[SLIDING_WINDOW_COUNTER].expiry = function(p, st)
	if st == nil then
		return nil
	end
	if st.curr > 0 then
		return st.ws + 2 * p.period
	elseif st.prev > 0 then
		return st.ws + p.period
	end
	return nil
end
