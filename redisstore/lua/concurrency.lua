-- concurrency.lua: algo.Concurrency. The state is a log of leases
-- (log.lua), each at the instant it expires: a check takes one until now
-- + P; a refund releases the oldest. Reset-after and retry-after are at
-- most FAR ticks (algo.Far).
A[CONCURRENCY] = { log = true }

A[CONCURRENCY].check = function(p, log, cost, r)
	local rate = p.rate
	log:dropThrough(0)
	local active = log:sum()
	local reset = 0
	local newest = log:newest()
	if newest ~= nil then
		reset = min(newest, FAR)
	end
	if cost > rate then
		never(r, rate - active, reset)
		return log
	end
	local over = active + cost - rate
	if over > 0 then
		result(r, false, max(rate - active, 0), reset, min(max(log:freedAt(over), 0), FAR), 0)
		return log
	end
	if cost > 0 then
		log:append(p.period, cost)
		reset = min(log:newest(), FAR)
	end
	result(r, true, rate - active - cost, reset, 0, 0)
	return log
end

A[CONCURRENCY].refund = function(_, log, n)
	log:dropThrough(0)
	log:takeOldest(n)
	return log
end

A[CONCURRENCY].expiry = function(_, log)
	return log:newest()
end
