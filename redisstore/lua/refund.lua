-- refund.lua: the refund function. ARGV as check.lua's, each refund one
-- argument: its cost (a little-endian double), its number of limits k (a
-- byte) and k references. Each limit gets the cost back, bounded by two
-- capacities' worth (no state holds more), as algo's Refund; the same key
-- and limit twice gets it twice. The reply is "".

local function refund(D, arg, mark)
	local cost, k = struct.unpack('<dB', arg)
	S.refs(D, arg, 10, k)
	for i = 1, k do
		local p, s = S.p[i], S.st[i]
		local most = p.rate
		if p.alg <= 3 then
			most = p.burst
		end
		if p.cd then
			most = most + 1
		end
		local n = math.min(cost, 2 * most)
		if s.log then
			A[p.alg].refund(p, s.log, n)
		else
			s.cur = A[p.alg].refund(p, s.cur, n)
		end
	end
	for i = 1, k do
		S.save(i, mark)
	end
end

local function refundCall(keys, args)
	KEYS, ARGV = keys, args
	T.init()
	local D, base = S.limits()
	for c = 1, tonumber(ARGV[base]) do
		refund(D, ARGV[base + c], c)
	end
	return ''
end
