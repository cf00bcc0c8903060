-- tokenbucket.lua: algo.TokenBucket. The state d is the instant the
-- bucket is full again, relative to now; the credit, in nanoseconds of
-- refill, is B×I − max(0, d).
A[1] = A.bucket()

A[1].check = function(p, d, cost)
	local N = p.N
	local interval, full = p.interval, p.span
	local credit = full
	if d ~= nil and N.lt(0, d) then
		credit = N.sub(full, d)
	end
	if cost > p.burst then
		return d, false, N.max(N.fdiv(credit, interval), 0), N.max(N.sub(full, credit), 0), false, 0
	end
	local need = N.mul(interval, cost)
	if N.lt(credit, need) then
		return d, false, N.max(N.fdiv(credit, interval), 0), N.sub(full, credit), N.sub(need, credit), 0
	end
	credit = N.sub(credit, need)
	if cost > 0 then
		d = N.sub(full, credit)
	end
	return d, true, N.fdiv(credit, interval), N.sub(full, credit), 0, 0
end
