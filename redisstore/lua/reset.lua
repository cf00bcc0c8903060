-- reset.lua: the reset function. ARGV as check.lua's, each reset one
-- argument: its number of limits k (a byte) and k references; every limit
-- of it forgets the key's state. The reply is "".

local function reset(D, arg)
	local k = struct.unpack('<B', arg)
	local pos = 2
	for _ = 1, k do
		local di, ki = struct.unpack('<HH', arg, pos)
		local key = KEYS[ki]
		if A[D[di].alg].log then
			R('DEL', key)
		else
			R('HDEL', key, string.sub(arg, pos + 4, pos + 11))
		end
		pos = pos + 12
	end
end

local function resetCall(keys, args)
	enter(keys, args)
	T.std()
	local D, base = S.limits()
	for c = 1, tonumber(ARGV[base]) do
		reset(D, ARGV[base + c])
	end
	return ''
end
