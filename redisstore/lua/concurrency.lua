-- concurrency.lua: algo.Concurrency. The state is a log of leases
-- (log.lua), each at the instant it expires: a check takes one until now
-- + P; a refund releases the oldest.
A[7] = { log = true }

A[7].check = function(p, log, cost)
	local rate = p.rate
	log:dropThrough(0)
	local active = log:sum()
	local reset = 0
	local newest = log:newest()
	if newest ~= nil then
		reset = newest
	end
	if cost > rate then
		return log, false, math.max(rate - active, 0), N.max(reset, 0), false, 0
	end
	local over = active + cost - rate
	if over > 0 then
		return log, false, math.max(rate - active, 0), reset, N.max(log:freedAt(over), 0), 0
	end
	if cost > 0 then
		log:append(p.period, cost)
		reset = log:newest()
	end
	return log, true, rate - active - cost, reset, 0, 0
end

A[7].refund = function(_, log, n)
	log:dropThrough(0)
	log:takeOldest(n)
	return log
end

A[7].expiry = function(_, log)
	return log:newest()
end
