-- gcra.lua: algo.GCRA. The state d is the theoretical arrival time
-- relative to now.
A[2] = A.bucket()

A[2].check = function(p, d, cost)
	local N = p.N
	local interval, capacity = p.interval, p.span
	local tat = 0
	if d ~= nil and N.lt(0, d) then
		tat = d
	end
	if cost > p.burst then
		return d, false, N.max(N.fdiv(N.sub(capacity, tat), interval), 0), tat, false, 0
	end
	local nxt = N.add(tat, N.mul(interval, cost))
	local over = N.sub(nxt, capacity)
	if N.lt(0, over) then
		return d, false, N.max(N.fdiv(N.sub(capacity, tat), interval), 0), tat, over, 0
	end
	if cost > 0 then
		d = nxt
	end
	return d, true, N.max(N.fdiv(N.sub(capacity, nxt), interval), 0), nxt, 0, 0
end
