-- shares.lua: the shares function (store.Sharer). ARGV[1]: the time
-- (time.lua); ARGV[2]: the shares' TTL in µs; ARGV[3]: the most shares a
-- pair keeps; then two per key of KEYS: an instance and its share
-- ("<demand> <allowance> <window>"). Each key is a pair's hash: fields
-- the instances, values "<until> <share>", until the share's expiry in
-- Unix µs on the call's clock.
--
-- For each key in turn, the call records the instance's share, drops the
-- expired ones, and, past the most a pair keeps, those that expire first
-- (never the one just recorded); the hash expires with its last share.
-- The reply holds, per key, the other instances' live fields and values,
-- flat.

-- untilOf reads a stored share's expiry.
local function untilOf(v)
	return tonumber(string.sub(v, 1, string.find(v, ' ', 1, true) - 1))
end

-- dropFirst drops from the hash key the n shares of others (a list of
-- {field, value, until}) that expire first, and from others too.
local function dropFirst(key, others, n)
	table.sort(others, function(a, b)
		return a[3] < b[3]
	end)
	for i = 1, n do
		R('HDEL', key, others[i][1])
	end
	local kept = {}
	for i = n + 1, #others do
		kept[#kept + 1] = others[i]
	end
	return kept
end

local function exchange(key, inst, share, ttl, most)
	local now = T.us
	local all = R('HGETALL', key)
	local others, last = {}, 0
	for i = 1, #all, 2 do
		local f, v = all[i], all[i + 1]
		local u = untilOf(v)
		if u <= now then
			R('HDEL', key, f)
		elseif f ~= inst then
			others[#others + 1] = { f, v, u }
			last = math.max(last, u)
		end
	end
	local n = #others
	if ttl > 0 then
		R('HSET', key, inst, string.format('%d', now + ttl) .. ' ' .. share)
		last = math.max(last, now + ttl)
		n = n + 1
	else
		R('HDEL', key, inst)
	end
	if n > most then
		others = dropFirst(key, others, n - most)
	end
	if last > now then
		R('PEXPIRE', key, math.ceil((last - now) / 1000))
	end
	local out = {}
	for i = 1, #others do
		out[2 * i - 1], out[2 * i] = others[i][1], others[i][2]
	end
	return out
end

local function sharesCall(keys, args)
	enter(keys, args)
	T.init()
	local ttl, most = tonumber(ARGV[2]), tonumber(ARGV[3])
	local reply = {}
	for i = 1, #KEYS do
		reply[i] = exchange(KEYS[i], ARGV[2 + 2 * i], ARGV[3 + 2 * i], ttl, most)
	end
	return reply
end
