-- store.lua: how a limit's state is kept. One-word states (the buckets,
-- the fixed window, the sliding window counter) are fields of a hash that
-- the keys of one bucket share, field the key's digest; log states are
-- sorted sets of their own (log.lua). Every key a call touches is among
-- its KEYS.
--
-- A hash's TTL covers every state it holds: a write extends it
-- (PEXPIREAT ... GT) to the granule of the new state's expiry — the
-- expiry, in Unix ms, rounded up past a multiple of the limit's step
-- (p.step, algo.lua: a sixteenth of the farthest any of its states
-- expires, at least a minute) — so that a state written again and again
-- extends it once in many writes. A write skips that when the new
-- expiry's granule is no later than the granule of the field's old expiry,
-- past or not: the granule of an expiry depends on it alone, never on the
-- clock, so the TTL an earlier write left covers it, whatever clock the
-- writes read, and a hash that holds the field has not expired since.
--
-- A state written fresh is deleted. A write that adds a field samples two
-- others and deletes those that are idle, fresh for a minute (p.idle), so
-- that a busy hash keeps no idle keys. A state that has only just
-- refilled stays: its key, a client below its limit, is likely to come
-- back soon, and deleting it would make that check add a field and
-- delete two others in turn (docs/redis.md measures it).

local S = {}

-- granule returns, in Unix ms, where a hash of states of a limit of
-- parameters p goes for an expiry e (ticks from now): past a multiple of
-- p.step after the expiry's millisecond (T.ms, written out: a check
-- computes two).
local function granule(p, e)
	local at
	if p.tick ~= 1 then
		at = floor((T.us + e) / 1000) + 1
	else
		at = T.s * 1000 + floor((T.n + e) / 1000000) + 1
	end
	local step = p.step
	return at - at % step + step
end
-- extend keeps key's TTL at least until e, for a field that existed
-- before (expiring at oe) or not. It returns true if the key had no TTL,
-- which makes it a hash the call has just created.
function S.extend(p, key, e, existed, oe)
	if T.pinned then
		-- Redis expires keys on its own clock, which a pinned time does
		-- not drive: keep them for the test instead.
		local ttl = math.max(fdiv(e, p.ms) + 1, 600000)
		if R('PEXPIRE', key, ttl, 'GT') == 0 then
			return R('PEXPIRE', key, ttl, 'NX') == 1
		end
		return false
	end
	-- The field's old expiry oe, past or not, was covered by the write
	-- that stored it, and the hash has not expired since (it holds the
	-- field): its granule's TTL is still there.
	if existed and oe ~= nil and e <= oe then
		return false -- a window's checks share one expiry
	end
	local g
	if existed and oe ~= nil then
		-- granule(p, oe) >= granule(p, e), written out: a check that
		-- keeps a bucket's granule, the common case, calls nothing.
		local a, b
		if p.tick ~= 1 then
			a, b = floor((T.us + oe) / 1000) + 1, floor((T.us + e) / 1000) + 1
		else
			local base = T.s * 1000 + 1
			a, b = base + floor((T.n + oe) / 1000000), base + floor((T.n + e) / 1000000)
		end
		local step = p.step
		g = b - b % step + step
		if a - a % step + step >= g then
			return false
		end
	else
		g = granule(p, e)
	end
	-- GT leaves a key without a TTL alone: only a new field may have made
	-- the hash.
	if R('PEXPIREAT', key, g, 'GT') == 0 and not existed then
		return R('PEXPIREAT', key, g, 'NX') == 1
	end
	return false
end

-- A word: the state of one limit of one key in a hash, loaded once per
-- check and saved at its end.
function S.loadWord(p, key, field, w)
	local raw = R('HGET', key, field)
	local st = nil
	if raw then
		st = A[p.alg].decode(p, raw)
	end
	w = w or {}
	w.key, w.field, w.existed, w.orig, w.cur, w.log, w.saved = key, field, raw ~= false, st, st, nil, nil
	return w
end

function S.saveWord(p, w)
	local alg = A[p.alg]
	local e = w.cur
	if e ~= nil and not alg.instant then
		e = alg.expiry(p, e)
	end
	if e == nil or e <= 0 then
		if w.existed then
			R('HDEL', w.key, w.field)
		end
		return
	end
	local added = R('HSET', w.key, w.field, alg.encode(p, w.cur)) == 1
	local oe = w.orig
	if oe ~= nil and not alg.instant then
		oe = alg.expiry(p, oe)
	end
	if not S.extend(p, w.key, e, w.existed, oe) and added then
		local sample = R('HRANDFIELD', w.key, 2, 'WITHVALUES')
		for i = 1, #sample, 2 do
			if sample[i] ~= w.field then
				local st = alg.decode(p, sample[i + 1])
				local x = nil
				if st ~= nil then
					x = alg.expiry(p, st)
				end
				if x == nil or x <= p.idle then
					R('HDEL', w.key, sample[i])
				end
			end
		end
	end
end

-- The limits a call argument names, from byte pos on: k times a limit
-- definition's index and a key's (two little-endian 16-bit integers) and
-- an 8-byte hash field. S.p[i] is the i-th's parameters and S.st[i] its
-- state: one per distinct key and field, loaded (a word) or opened (a log)
-- once. The arrays are the call's, reused by each check in turn.
S.p, S.st, S.words = {}, {}, {}

function S.refs(D, arg, pos, k)
	local P, ST = S.p, S.st
	for i = 1, k do
		local di, ki = struct.unpack('<HH', arg, pos)
		local p, key = D[di], KEYS[ki]
		local field = string.sub(arg, pos + 4, pos + 11)
		pos = pos + 12
		local s = nil
		for j = 1, i - 1 do
			local o = ST[j]
			if o.key == key and (o.log or o.field == field) then
				s = o
				break
			end
		end
		if s == nil then
			if A[p.alg].log then
				s = { key = key, log = L.open(key, p) }
			else
				-- The word of the i-th place is reused check after check.
				s = S.loadWord(p, key, field, S.words[i])
				S.words[i] = s
			end
		end
		P[i], ST[i] = p, s
	end
end

-- save stores the state of the i-th limit, unless a limit of the same key
-- and field was saved in this check (mark).
function S.save(i, mark)
	local p, s = S.p[i], S.st[i]
	if s.saved == mark then
		return
	end
	s.saved = mark
	if s.log then
		s.log:save(A[p.alg].expiry(p, s.log))
	else
		S.saveWord(p, s)
	end
end

-- limits reads the call's limit definitions, ARGV[3] to ARGV[2 + L]. A
-- definition's parameters are kept from call to call (the library's
-- state lives as long as it is loaded), up to 1024 of them; they are never
-- changed once made.
local known, nknown = {}, 0

function S.limits()
	local D = {}
	for i = 1, tonumber(ARGV[2]) do
		local def = ARGV[2 + i]
		local p = known[def]
		if p == nil then
			if nknown >= 1024 then
				known, nknown = {}, 0
			end
			p = A.params(def)
			known[def], nknown = p, nknown + 1
		end
		D[i] = p
	end
	return D, 3 + #D
end
