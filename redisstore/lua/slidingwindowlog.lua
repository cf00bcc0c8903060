-- slidingwindowlog.lua: algo.SlidingWindowLog. The state is a log of
-- admitted units (log.lua): the window is (now − P, now]. Reset-after and
-- retry-after are at most FAR ticks (algo.Far).
A[SLIDING_WINDOW_LOG] = { log = true }

A[SLIDING_WINDOW_LOG].check = function(p, log, cost, r)
	local rate, period = p.rate, p.period
	log:dropThrough(-period)
	local used = log:sum()
	local reset = 0
	local newest = log:newest()
	if newest ~= nil then
		reset = min(newest + period, FAR)
	end
	if cost > rate then
		never(r, rate - used, reset)
		return log
	end
	local over = used + cost - rate
	if over > 0 then
		result(r, false, max(rate - used, 0), reset, min(max(log:freedAt(over) + period, 0), FAR), 0)
		return log
	end
	if cost > 0 then
		log:append(0, cost)
		reset = max(reset, period)
	end
	result(r, true, rate - used - cost, reset, 0, 0)
	return log
end

-- refund gives n units back, the newest first.
A[SLIDING_WINDOW_LOG].refund = function(p, log, n)
	log:dropThrough(-p.period)
	log:takeNewest(n)
	return log
end

-- charge is the log's debt (algo's chargeSlidingWindowLog): n units at
-- now, past the rate; a log already in debt gets them in its newest
-- entry, moved to now. The units stop at FAR.
A[SLIDING_WINDOW_LOG].charge = function(p, log, n)
	log:dropThrough(-p.period)
	local used = log:sum()
	n = min(n, max(FAR - used, 0))
	if n <= 0 then
		return log
	end
	if used <= p.rate then
		log:append(0, n)
	else
		log:moveNewest(n)
	end
	return log
end

A[SLIDING_WINDOW_LOG].expiry = function(p, log)
	local newest = log:newest()
	if newest == nil then
		return nil
	end
	return newest + p.period
end
