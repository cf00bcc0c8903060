-- leakybucket.lua: algo.LeakyBucket. The state d is the instant the bucket
-- is empty, relative to now; the level is max(0, d). Shape mode admits the
-- same checks as police mode, with a delay of the level.
A[3] = A.bucket()

A[3].check = function(p, d, cost)
	local N = p.N
	local interval, depth = p.interval, p.span
	local level = 0
	if d ~= nil and N.lt(0, d) then
		level = d
	end
	if cost > p.burst then
		return d, false, N.max(N.fdiv(N.sub(depth, level), interval), 0), level, false, 0
	end
	local over = N.sub(N.add(level, N.mul(interval, cost)), depth)
	if N.lt(0, over) then
		return d, false, N.max(N.fdiv(N.sub(depth, level), interval), 0), level, over, 0
	end
	local delay = 0
	if p.shape and cost > 0 then
		delay = level
	end
	level = N.add(level, N.mul(interval, cost))
	if cost > 0 then
		d = level
	end
	return d, true, N.fdiv(N.sub(depth, level), interval), level, 0, delay
end
