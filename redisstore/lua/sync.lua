-- sync.lua: the sync function (store.Sharer's SyncShares), a sync of
-- package hybrid in one call: the check function's checks (its pushes),
-- then the shares function's exchange of the shares given. ARGV: the
-- check function's arguments (check.lua), then the shares' TTL in µs,
-- the most shares a pair keeps, and two per share: the index in KEYS of
-- its pair's shares hash, then its instance and its share (shares.lua).
-- The reply: the check function's, then per share the other instances'
-- live fields and values, flat.

local function syncCall(keys, args)
	enter(keys, args)
	T.init()
	local D, base = S.limits()
	local checks = tonumber(ARGV[base])
	local out, n = {}, 0
	for c = 1, checks do
		n = check(D, ARGV[base + c], c, out, n)
	end
	local reply = { table.concat(out, '', 1, n) }
	local i = base + checks + 1
	local ttl, most = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
	for j = i + 2, #ARGV, 3 do
		reply[#reply + 1] = exchange(KEYS[tonumber(ARGV[j])], ARGV[j + 1], ARGV[j + 2], ttl, most)
	end
	return reply
end
