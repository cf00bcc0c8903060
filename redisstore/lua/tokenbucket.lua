-- tokenbucket.lua: algo.TokenBucket. The state d is the instant the
-- bucket is full again, relative to now; the credit, in ticks of refill,
-- is B×I − max(0, d).
A[TOKEN_BUCKET] = A.bucket()

A[TOKEN_BUCKET].check = function(p, d, cost, r)
	local interval, full = p.interval, p.span
	local credit = full
	if d ~= nil and d > 0 then
		credit = full - d
	end
	if cost > p.burst then
		never(r, floor(credit / interval), full - credit)
		return d
	end
	local need = interval * cost
	if need > credit then
		r.allowed, r.remaining, r.reset, r.retry, r.delay = false, max(floor(credit / interval), 0), full - credit, need - credit, 0
		return d
	end
	credit = credit - need
	if cost > 0 then
		d = full - credit
	end
	r.allowed, r.remaining, r.reset, r.retry, r.delay = true, floor(credit / interval), full - credit, 0, 0
	return d
end
