-- check.lua: the check function. ARGV[1]: the time (time.lua);
-- ARGV[2]: L, then L limit definitions (algo.lua); then C, then C checks,
-- each one argument: its cost (a little-endian double), a flag byte (1:
-- decide it as denied elsewhere, charging only the limits that charge
-- denied checks, as a check another call of the same request denied; 2:
-- a charge, below), its number of limits k (a byte), and k references
-- (store.lua's refs).
--
-- A charge (bouncer.Charger) takes the cost from every limit whatever it
-- holds, past its capacity if need be (A[alg].charge), and decides
-- nothing: its reply is the byte 1 alone. Charges travel as checks so
-- that they are batched with them.
--
-- Each check is decided after the ones before it, all or nothing, as
-- memstore decides it: allowed, every limit is charged; denied, only the
-- limits that charge denied checks; the same key and limit twice is
-- charged twice. The reply is one string, per check: allowed (a byte),
-- then per limit its result (pack). A limit that would have allowed a
-- denied check reports itself as it was, peeked at with cost 0.

-- pack writes a limit's result r: a byte (1: allowed), then remaining,
-- reset-after, retry-after (-1: never) and delay as doubles, durations in
-- the limit's ticks.
local function pack(r)
	local b = 0
	if r.allowed then
		b = 1
	end
	return struct.pack('<Bdddd', b, r.remaining, r.reset, r.retry or -1, r.delay)
end

local oks, replies, res = {}, {}, {}

-- check decides the check of call argument arg and appends its reply to
-- out, a list of strings from n on; it returns the list's new length.
local function check(D, arg, mark, out, n)
	local cost, flag, k = struct.unpack('<dBB', arg)
	S.refs(D, arg, 11, k)
	local P, ST = S.p, S.st
	if flag == 2 then
		for i = 1, k do
			local p, s = P[i], ST[i]
			if s.log then
				A[p.alg].charge(p, s.log, cost)
			else
				s.cur = A[p.alg].charge(p, s.cur, cost)
			end
		end
		for i = 1, k do
			S.save(i, mark)
		end
		out[n + 1] = '\1'
		return n + 1
	end
	local elsewhere = flag == 1
	local allowed = not elsewhere
	for i = 1, k do
		local p, s = P[i], ST[i]
		oks[i] = nil
		if not elsewhere or p.cd then
			local st = s.cur
			if s.log then
				st = s.log
			end
			s.cur = A[p.alg].check(p, st, cost, res)
			local ok = res.allowed
			local b = 0
			if ok then
				b = 1
			end
			oks[i] = ok
			replies[i] = struct.pack('<Bdddd', b, res.remaining, res.reset, res.retry or -1, res.delay) -- pack, written out
			allowed = allowed and ok
		end
	end
	if cost > 0 then
		for i = 1, k do
			local s = ST[i]
			if (allowed or P[i].cd and oks[i] ~= nil and s.cur ~= s.orig) and s.saved ~= mark then
				S.save(i, mark)
			end
		end
	end
	if elsewhere then
		return n
	end
	for i = 1, k do
		if not allowed and oks[i] then
			-- Report the limit as it was, peeked at with cost 0.
			local p, s = P[i], ST[i]
			local st = s.orig
			if s.log then
				st = s.log:view()
			end
			A[p.alg].check(p, st, 0, res)
			res.allowed = true
			replies[i] = pack(res)
		end
	end
	if allowed then
		out[n + 1] = '\1'
	else
		out[n + 1] = '\0'
	end
	for i = 1, k do
		out[n + 1 + i] = replies[i]
	end
	return n + 1 + k
end

-- checkCall is the check function's body.
local function checkCall(keys, args)
	enter(keys, args)
	T.init()
	local D, base = S.limits()
	local out, n = {}, 0
	for c = 1, tonumber(ARGV[base]) do
		n = check(D, ARGV[base + c], c, out, n)
	end
	return table.concat(out, '', 1, n)
end
