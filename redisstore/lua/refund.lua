-- refund.lua: the refund function. ARGV as check.lua's, each refund one
-- argument: its cost (a little-endian double), its number of limits k (a
-- byte) and k references. Each limit gets the cost back (A.refund); the
-- same key and limit twice gets it twice. The reply is "".

local function refund(D, arg, mark)
	local cost, k = struct.unpack('<dB', arg)
	S.refs(D, arg, 10, k)
	for i = 1, k do
		local p, s = S.p[i], S.st[i]
		if s.log then
			A.refund(p, s.log, cost)
		else
			s.cur = A.refund(p, s.cur, cost)
		end
	end
	for i = 1, k do
		S.save(i, mark)
	end
end

local function refundCall(keys, args)
	enter(keys, args)
	T.init()
	local D, base = S.limits()
	for c = 1, tonumber(ARGV[base]) do
		refund(D, ARGV[base + c], c)
	end
	return ''
end
