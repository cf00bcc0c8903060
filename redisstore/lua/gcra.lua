-- gcra.lua: algo.GCRA. The state d is the theoretical arrival time
-- relative to now.
A[GCRA] = A.bucket()

A[GCRA].check = function(p, d, cost, r)
	local interval, capacity = p.interval, p.span
	local tat = 0
	if d ~= nil and d > 0 then
		tat = d
	end
	if cost > p.burst then
		never(r, floor((capacity - tat) / interval), tat)
		return d
	end
	local nxt = tat + interval * cost
	local over = nxt - capacity
	if over > 0 then
		r.allowed, r.remaining, r.reset, r.retry, r.delay = false, max(floor((capacity - tat) / interval), 0), tat, over, 0
		return d
	end
	if cost > 0 then
		d = nxt
	end
	local rem = floor((capacity - nxt) / interval)
	if rem < 0 then
		rem = 0
	end
	r.allowed, r.remaining, r.reset, r.retry, r.delay = true, rem, nxt, 0, 0
	return d
end
