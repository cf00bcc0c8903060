-- slidingwindowlog.lua: algo.SlidingWindowLog. The state is a log of
-- admitted units (log.lua): the window is (now − P, now].
A[5] = { log = true }

A[5].check = function(p, log, cost)
	local rate, period = p.rate, p.period
	log:dropThrough(N.sub(0, period))
	local used = log:sum()
	local reset = 0
	local newest = log:newest()
	if newest ~= nil then
		reset = N.add(newest, period)
	end
	if cost > rate then
		return log, false, math.max(rate - used, 0), N.max(reset, 0), false, 0
	end
	local over = used + cost - rate
	if over > 0 then
		return log, false, math.max(rate - used, 0), reset, N.max(N.add(log:freedAt(over), period), 0), 0
	end
	if cost > 0 then
		log:append(0, cost)
		reset = N.max(reset, period)
	end
	return log, true, rate - used - cost, reset, 0, 0
end

-- refund gives n units back, the newest first.
A[5].refund = function(p, log, n)
	log:dropThrough(N.sub(0, p.period))
	log:takeNewest(n)
	return log
end

A[5].expiry = function(p, log)
	local newest = log:newest()
	if newest == nil then
		return nil
	end
	return N.add(newest, p.period)
end
