-- leakybucket.lua: algo.LeakyBucket. The state d is the instant the bucket
-- is empty, relative to now; the level is max(0, d). Shape mode admits the
-- same checks as police mode, with a delay of the level.
A[LEAKY_BUCKET] = A.bucket()

A[LEAKY_BUCKET].check = function(p, d, cost, r)
	local interval, depth = p.interval, p.span
	local level = 0
	if d ~= nil and d > 0 then
		level = d
	end
	if cost > p.burst then
		never(r, floor((depth - level) / interval), level)
		return d
	end
	local over = level + interval * cost - depth
	if over > 0 then
		r.allowed, r.remaining, r.reset, r.retry, r.delay = false, max(floor((depth - level) / interval), 0), level, over, 0
		return d
	end
	local delay = 0
	if p.shape and cost > 0 then
		delay = level
	end
	level = level + interval * cost
	if cost > 0 then
		d = level
	end
	r.allowed, r.remaining, r.reset, r.retry, r.delay = true, floor((depth - level) / interval), level, 0, delay
	return d
end
