-- check.lua: one Bouncer check (or refund) of several limits, all or
-- nothing, in one call. The algorithms are those of the Go package algo,
-- computing the same integers: see docs/redis.md for the arithmetic.
--
-- KEYS: the Redis keys the limits use, each once. A one-word limit (token
--   bucket, GCRA, leaky bucket, fixed window, sliding window counter) keeps
--   its state in a field of a hash shared by the keys of one bucket; a log
--   limit (sliding window log, concurrency) keeps its own string key.
-- ARGV[1]: "" to read the time with TIME, or a pinned time in Unix
--   nanoseconds (tests only).
-- ARGV[2]: cost (a non-negative integer).
-- ARGV[3]: "c" to check, "r" to refund cost, "d" to charge cost to the
--   limits that charge denied checks, as a check that is denied would
--   (a Cluster check that another call denied); "b" for a batch of checks
--   (see the end of the script); "p" for a packed batch of checks of one
--   limit each (see "A packed batch" below), which the store sends for
--   every check of one limit, batched or not; "P" for a packed batch on a
--   Cluster, whose keys are arguments (see "On a Cluster" below).
-- ARGV[4]: L, the number of limits; then 10 arguments per limit:
--   key index (into KEYS), hash field ("" for a log key), algorithm
--   (1 token bucket, 2 GCRA, 3 leaky bucket, 4 fixed window, 5 sliding
--   window log, 6 sliding window counter, 7 concurrency), rate, burst,
--   period, interval, unit, pair (see algo.Params), flag (0; 1: shape;
--   2: charge denied checks).
--   Durations are in nanoseconds, each below 2^52.
-- Reply: for a packed batch ("p", "P"), see F.emitPacked and "On a
--   Cluster". Otherwise, for a check, 1 if every limit allows (and the cost was charged)
--   else 0 (and the cost was charged to the limits that charge denied
--   checks only), then 5 integers per limit: allows (1 or 0; when the
--   check is denied, a limit that would have allowed reports itself as it
--   was, peeked at with cost 0), remaining, reset-after, retry-after (-1:
--   never), delay; in nanoseconds. For a refund or "d", the integer 0.
--
-- Redis runs the whole chunk on every call, and every function statement
-- it passes makes a closure: the common checks are therefore decided as
-- early as possible, before the code they do not need is even defined —
-- a fixed window of whole seconds first (what bouncer serve checks for an
-- envoyproxy/ratelimit config), then a bucket, then everything else.

-- Every function is a field of F rather than a local: a closure costs
-- Redis far more per call for each local it captures than for one table.
local F = {}

-- Instants are pairs (s, n): seconds and nanoseconds, 0 <= n < 1e9, so
-- that a double holds each part exactly.

function F.parse(v)
	local len = #v
	if len <= 9 then
		return 0, tonumber(v)
	end
	return tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
end

function F.fmt(s, n)
	if s == 0 then
		return string.format('%d', n)
	end
	return string.format('%d%09d', s, n)
end

-- fdiv is floor(a / b) for integers below 2^53, b > 0, corrected for the
-- rounding of the double quotient.
function F.fdiv(a, b)
	local q = math.floor(a / b)
	local r = a - q * b
	while r < 0 do
		q = q - 1
		r = r + b
	end
	while r >= b do
		q = q + 1
		r = r - b
	end
	return q
end

-- Time, cost and mode. F.K is where key indexes point: KEYS, or ARGV
-- for a packed batch on a Cluster ("P", below).
F.A, F.K = ARGV, KEYS
F.pinned = ARGV[1] ~= ''
if F.pinned then
	F.ns, F.nn = F.parse(ARGV[1])
else
	local t = redis.call('TIME')
	F.ns, F.nn = tonumber(t[1]), tonumber(t[2]) * 1000
end

-- nowms is now in Unix milliseconds, rounded down.
F.nowms = F.ns * 1000 + math.floor(F.nn / 1000000)

-- step returns the step to which the TTL for an expiry ems milliseconds
-- from now is rounded up: 1000 ms times the least power of two with
-- step × 16 > ems, at most about an eighth of ems, so that a state whose
-- expiry moves later on every check (a bucket charged again and again)
-- extends its hash's TTL once in many checks, not on each. The exponent
-- comes from math.frexp, then is corrected against the same comparison,
-- so the step is exactly the least such power however the quotient
-- rounds.
function F.step(ems)
	if ems < 16000 then
		return 1000
	end
	local _, x = math.frexp(ems / 16000)
	local step = 1000 * 2 ^ x
	while step * 16 <= ems do
		step = step * 2
	end
	while step > 1000 and step * 8 > ems do
		step = step / 2
	end
	return step
end

-- granule returns, in Unix milliseconds, the instant to which a hash's
-- TTL is extended for an expiry e ns from now: the expiry rounded up to a
-- millisecond (F.nowms + floor(e / 10^6) + 1), then to a multiple of its
-- F.step.
function F.granule(e)
	local ems = e / 1000000
	local ms = F.nowms + math.floor(ems) + 1
	local step = F.step(ems)
	return ms - ms % step + step
end

-- extend keeps key's TTL at least until e ns from now, for a field that
-- existed before (expiring oe ns from now) or not. It returns true if the
-- key had no TTL, which makes it a hash that the call has just created:
-- any hash that held a field before got its TTL then.
function F.extend(key, e, existed, oe)
	if F.pinned then
		-- Redis expires keys on its own clock, which a pinned time does
		-- not drive: keep them for the test instead.
		local ttl = math.max(math.floor(e / 1000000) + 1, 600000)
		if redis.call('PEXPIRE', key, ttl, 'GT') == 0 then
			return redis.call('PEXPIRE', key, ttl, 'NX') == 1
		end
		return false
	end
	-- Every write keeps the hash's expiry at or after the granule of each
	-- of its fields' expiries. Steps are powers of two that only shrink as
	-- an expiry comes nearer, so the granule of the old expiry, computed
	-- now, is at most the TTL its writer left: if it is at least the new
	-- expiry's granule, the TTL already is too, and the invariant holds
	-- for the new state. (Comparing it with the new expiry itself, rather
	-- than with its granule, let a run of skipped writes leave the TTL at
	-- the first write's granule: a new bucket checked many times in its
	-- first second was forgotten at the next whole second.)
	local g = F.granule(e)
	if existed and oe > 0 and F.granule(oe) >= g then
		return false
	end
	-- GT leaves a key without a TTL alone: only a new field may have made
	-- the hash.
	if redis.call('PEXPIREAT', key, g, 'GT') == 0 and not existed then
		return redis.call('PEXPIREAT', key, g, 'NX') == 1
	end
	return false
end

-- sweep forgets up to two fields of key, other than field, whose states
-- are fresh by expiry (a function of the stored value); a check calls it
-- when it adds a field to a hash that held others, so that a busy hash
-- does not keep idle keys. (A hash the call has just made holds the new
-- field alone: sampling it would find nothing else.)
function F.sweep(key, field, expiry)
	local sample = redis.call('HRANDFIELD', key, 2, 'WITHVALUES')
	for i = 1, #sample, 2 do
		if sample[i] ~= field and expiry(sample[i + 1]) <= 0 then
			redis.call('HDEL', key, sample[i])
		end
	end
end

-- emit appends a one-limit check's reply to out: allowed (1 or 0) twice
-- (the check's and its limit's), then remaining, reset-after, retry-after
-- and delay. A packed batch replaces it with F.emitPacked.
function F.emit(out, ok, rem, reset, retry, delay)
	local o = #out
	out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = ok, ok, rem, reset, retry, delay
end

-- emitPacked appends the same reply packed in one string: allowed as a
-- byte, then the four numbers as little-endian doubles (33 bytes). A
-- packed batch replies with those strings concatenated: one bulk string,
-- which Redis sends and the client reads far more cheaply than six
-- integers a check.
function F.emitPacked(out, ok, rem, reset, retry, delay)
	out[#out + 1] = struct.pack('<Bdddd', ok, rem, reset, retry, delay)
end

-- A fixed window whose period is a whole number of seconds (every
-- envoyproxy/ratelimit unit) starts its windows at whole seconds, so the
-- window of an instant (s, n) is that of s: the window start, the count
-- and the reply come from a few integer operations on seconds, without
-- the general path's pair arithmetic, and the new state is
-- start + count × unit, formatted as the general path formats it. The
-- decisions, the state and its TTL are those of F.fixedWindow and F.save.

-- fixedExpiry is F.expiry of a fixed window's stored value v, for the
-- window of F.wps seconds and unit F.wunit (a function of F rather than a
-- closure: see F).
function F.fixedExpiry(v)
	local s, n = F.parse(v)
	local ws = s - s % F.wps
	if F.fdiv((s - ws) * 1000000000 + n, F.wunit) == 0 then
		return -1
	end
	return (ws + F.wps - F.ns) * 1000000000 - F.nn
end

-- fixed decides a check of cost of a fixed window of period ns, rate and
-- unit (cd: it charges denied checks), whose state is field of hash key,
-- and appends its reply to out; it returns nil, having changed nothing, if
-- the period is not a whole number of seconds (or for a stored instant so
-- far from now that F.diff would clamp it): the general path decides
-- those.
function F.fixed(key, field, period, rate, unit, cd, cost, out)
	if period % 1000000000 ~= 0 then
		return nil
	end
	-- F.parse, F.fdiv and F.fmt are written out: a call costs more than
	-- their work. One correction makes a floored double quotient exact
	-- below 2^53.
	local ps, ns = period / 1000000000, F.ns
	local v = redis.call('HGET', key, field)
	local start, count, shifted = ns - ns % ps, 0, false -- now's window, in seconds
	if v then
		local len, s, n = #v, 0, 0
		if len > 9 then
			s, n = tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
		else
			n = tonumber(v)
		end
		if s - ns > 9000000 or ns - s > 9000000 then
			return nil
		end
		local ws = s - s % ps
		if ws >= start then
			-- A window after now's means the clock stepped back: count in
			-- the stored window, as of its start (algo's notBeforeWindow).
			shifted, start = ws > start, ws
			local m = (s - ws) * 1000000000 + n
			count = math.floor(m / unit)
			local r = m - count * unit
			if r < 0 then
				count = count - 1
			elseif r >= unit then
				count = count + 1
			end
		end
	end
	local was = count
	local e = (start + ps - ns) * 1000000000 - F.nn -- the window's end, from now
	local reset, ok, retry, charge = e, 1, 0, nil
	if shifted then
		reset = period
	end
	if cost > rate or count + cost > rate then
		ok = 0
		if cd and cost > 0 and count <= rate then
			-- Denied, and charged: count + cost > rate saturates at rate + 1.
			count = rate + 1
			charge = count
		end
		if cost > rate then
			if count == 0 then
				reset = 0
			end
			reset, retry = math.max(reset, 0), -1
		else
			retry = reset
		end
	else
		count = count + cost
		if cost > 0 then
			charge = count
		end
		if count == 0 then
			reset = 0
		end
	end
	if charge then
		-- The state: start + charge × unit, which is below a period.
		local d = charge * unit
		local q = math.floor(d / 1000000000)
		local n = d - q * 1000000000
		if n < 0 then
			q, n = q - 1, n + 1000000000
		elseif n >= 1000000000 then
			q, n = q + 1, n - 1000000000
		end
		local w
		if start + q == 0 then
			w = string.format('%d', n)
		else
			w = string.format('%d%09d', start + q, n)
		end
		local added = redis.call('HSET', key, field, w) == 1
		-- Once the field has counted in this window, the TTL covers the
		-- window's end (F.extend would find the old expiry's granule
		-- covers it, the expiry being the same).
		local made = false
		if was == 0 or F.pinned then
			made = F.extend(key, e, v ~= false, -1)
		end
		if added and not made then
			F.wps, F.wunit = ps, unit
			F.sweep(key, field, F.fixedExpiry)
		end
	end
	F.emit(out, ok, math.max(rate - count, 0), reset, retry, 0)
	return true
end

-- fixedAt is F.fixed for the one limit described by the arguments from
-- ARGV[base] on; it returns nil for any other algorithm.
function F.fixedAt(base, cost, out)
	if ARGV[base + 2] ~= '4' then
		return nil
	end
	return F.fixed(F.K[tonumber(ARGV[base])], ARGV[base + 1], tonumber(ARGV[base + 5]),
		tonumber(ARGV[base + 3]), tonumber(ARGV[base + 7]), ARGV[base + 9] == '2', cost, out)
end

-- The calls of fixed windows alone are decided before anything else is
-- defined. A batch is decided in turn as long as its checks are; the
-- general batch loop at the end takes over from the first that is not.
if ARGV[3] == 'b' then
	local out, b, k, n = {}, 4, 0, tonumber(ARGV[2])
	while k < n and ARGV[b + 1] == '1' and F.fixedAt(b + 2, tonumber(ARGV[b]), out) do
		b, k = b + 12, k + 1
	end
	if k == n then
		return out
	end
	F.out, F.b, F.k = out, b, k
elseif ARGV[3] == 'c' and ARGV[4] == '1' then
	local out = {}
	if F.fixedAt(5, tonumber(ARGV[2]), out) then
		return out
	end
end

-- diff returns a - b in nanoseconds, exact below 2^53 and clamped to
-- +-9007199254740992 beyond.
function F.diff(as, an, bs, bn)
	local ds = as - bs
	if ds > 9000000 then
		return 9007199254740992
	elseif ds < -9000000 then
		return -9007199254740992
	end
	return ds * 1000000000 + (an - bn)
end

-- add returns a + d for an integer d with |d| < 2^53.
function F.add(as, an, d)
	local ds = math.floor(d / 1000000000)
	local n = an + (d - ds * 1000000000)
	local s = as + ds
	while n >= 1000000000 do
		n = n - 1000000000
		s = s + 1
	end
	while n < 0 do
		n = n + 1000000000
		s = s - 1
	end
	return s, n
end

-- The bucket algorithms — token bucket, GCRA, leaky bucket — on d, the
-- stored instant minus now (-2^53 when fresh). Each returns the new d (nil
-- when unchanged), then allowed, remaining, reset-after, retry-after (-1:
-- never) and delay. They run for every check of a bucket, so the common
-- path compares where math.max would be a call.

function F.tokenBucket(d, c, burst, interval)
	local full = burst * interval
	local credit = full
	if d > 0 then
		credit = full - d
	end
	if c > burst then
		return nil, false, math.max(F.fdiv(credit, interval), 0), math.max(full - credit, 0), -1, 0
	end
	local need = c * interval
	if need > credit then
		return nil, false, math.max(F.fdiv(credit, interval), 0), full - credit, need - credit, 0
	end
	credit = credit - need
	local nd
	if c > 0 then
		nd = full - credit
	end
	return nd, true, F.fdiv(credit, interval), full - credit, 0, 0
end

function F.gcra(d, c, burst, interval)
	local capacity = burst * interval
	local tat = 0
	if d > 0 then
		tat = d
	end
	if c > burst then
		return nil, false, math.max(F.fdiv(capacity - tat, interval), 0), tat, -1, 0
	end
	local nxt = tat + c * interval
	local over = nxt - capacity
	if over > 0 then
		return nil, false, math.max(F.fdiv(capacity - tat, interval), 0), tat, over, 0
	end
	local nd
	if c > 0 then
		nd = nxt
	end
	return nd, true, F.fdiv(capacity - nxt, interval), nxt, 0, 0 -- nxt <= capacity
end

function F.leakyBucket(d, c, burst, interval, shape)
	local depth = burst * interval
	local level = 0
	if d > 0 then
		level = d
	end
	if c > burst then
		return nil, false, math.max(F.fdiv(depth - level, interval), 0), level, -1, 0
	end
	local over = level + c * interval - depth
	if over > 0 then
		return nil, false, math.max(F.fdiv(depth - level, interval), 0), level, over, 0
	end
	local delay = 0
	if shape and c > 0 then
		delay = level
	end
	level = level + c * interval
	local nd
	if c > 0 then
		nd = level
	end
	return nd, true, F.fdiv(depth - level, interval), level, 0, delay
end

local buckets = { F.tokenBucket, F.gcra, F.leakyBucket }
-- bucketExpiry is a bucket value's expiry relative to now: its instant.
function F.bucketExpiry(v)
	local s, n = F.parse(v)
	return F.diff(s, n, F.ns, F.nn)
end

-- bucketOne decides a check of cost of a bucket (algorithm a, burst,
-- interval, shape), whose state is field of hash key, and appends its
-- reply to out. Every check of a bucket comes here, so F.parse, F.diff,
-- F.add, F.fmt and the first test of F.extend are written out: a call
-- costs more than their work.
function F.bucketOne(key, field, a, burst, interval, shape, cost, out)
	local v = redis.call('HGET', key, field)
	local ns, nn, d = F.ns, F.nn, -9007199254740992
	if v then
		local len, s, n = #v, 0, 0
		if len > 9 then
			s, n = tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
		else
			n = tonumber(v)
		end
		local ds = s - ns
		if ds > 9000000 then
			d = 9007199254740992
		elseif ds >= -9000000 then
			d = ds * 1000000000 + (n - nn)
		end
	end
	local nd, ok, rem, reset, retry, delay = buckets[a](d, cost, burst, interval, shape)
	if not ok then
		F.emit(out, 0, rem, reset, retry, delay)
		return
	end
	if nd then
		local q = math.floor(nd / 1000000000)
		local n, s = nn + (nd - q * 1000000000), ns + q
		while n >= 1000000000 do
			n, s = n - 1000000000, s + 1
		end
		while n < 0 do
			n, s = n + 1000000000, s - 1
		end
		local w
		if s == 0 then
			w = string.format('%d', n)
		else
			w = string.format('%d%09d', s, n)
		end
		local added = redis.call('HSET', key, field, w) == 1
		-- A field that existed and expires d ns from now, whose granule
		-- is at least the new expiry's, leaves the hash's TTL as it is
		-- (F.extend would return false): the common case, decided without
		-- the call.
		if F.pinned or not v or d <= 0 or F.granule(d) < F.granule(nd) then
			if not F.extend(key, nd, v ~= false, d) and added then
				F.sweep(key, field, F.bucketExpiry)
			end
		elseif added then
			F.sweep(key, field, F.bucketExpiry)
		end
	end
	F.emit(out, 1, rem, reset, retry, delay)
end

-- fast decides a check of cost whose one limit, described by the
-- arguments from ARGV[base] on, is a bucket, and returns its reply; nil
-- for any other limit.
function F.fast(base, cost)
	local a = tonumber(ARGV[base + 2])
	if a > 3 then
		return nil
	end
	local out = {}
	F.bucketOne(F.K[tonumber(ARGV[base])], ARGV[base + 1], a, tonumber(ARGV[base + 4]),
		tonumber(ARGV[base + 6]), ARGV[base + 9] == '1', cost, out)
	return out
end

-- The common call — one check of one bucket limit — is decided before the
-- rest of the script is even defined.
if ARGV[3] == 'c' and ARGV[4] == '1' then
	local r = F.fast(5, tonumber(ARGV[2]))
	if r then
		return r
	end
end

-- A packed batch ("p"): ARGV[2] checks of one limit each. ARGV[4] is M,
-- the number of limits; ARGV[5] to ARGV[4 + M] describe them, each packed
-- as eight little-endian doubles (algorithm, rate, burst, period,
-- interval, unit, pair, flag: the numbers of a limit's arguments); then
-- one argument per check, packed as two little-endian 16-bit integers and
-- a double — its key index (into KEYS), its limit (1 to M) and its cost —
-- followed by its hash field ("" for a log key). The reply is one bulk
-- string, 33 bytes a check (see F.emitPacked). Packed, a check is 1
-- argument instead of 12, which Redis reads,
-- copies and converts far more cheaply. Buckets and fixed windows of whole
-- seconds are decided here; from the first check that is neither, the
-- loop at the end of the script takes over.
-- On a Cluster ("P"), a packed batch holds the checks of keys of many
-- slots that one node serves. Its keys follow the checks' arguments, each
-- once, and a check's key index points into ARGV; KEYS[1], one of them,
-- only routes the call to its node. Redis lets a script without flags
-- reach keys of other slots of its node, not of other nodes: when the
-- Store's map of slots is behind the Cluster's, a check's key may have
-- moved. A check's first access to its key is a read, so a check whose
-- key is elsewhere fails before it changes anything; the batch stops
-- there. Its reply is an array: the packed replies of the checks decided,
-- then, if it stopped, the error. The store sends the rest again, one
-- call each.
-- packedRun decides the checks of a packed batch from F.k on, on the fast
-- path while they allow it (to the end if general is set): a bucket's
-- check (the common one) by F.bucketOne, a fixed window's by F.fixed if
-- it can, any other by the general path.
function F.packedRun(general)
	local out, D, m, n, K = F.out, F.D, F.m, F.n, F.K
	while F.k < n do
		local arg = ARGV[5 + m + F.k]
		local ki, li, cost = struct.unpack('<HHd', arg)
		local l, field = D[li], string.sub(arg, 13)
		local a = l[1]
		if a <= 3 then
			F.bucketOne(K[ki], field, a, l[3], l[5], l[8] == 1, cost, out)
		elseif not (a == 4 and F.fixed(K[ki], field, l[4], l[2], l[6], l[8] == 2, cost, out)) then
			if not general then
				return
			end
			F.A = { ki, field, a, l[2], l[3], l[4], l[5], l[6], l[7], tostring(l[8]) }
			local r = F.check(1, cost, 1, 'c')
			F.emit(out, r[1], r[3], r[4], r[5], r[6])
		end
		F.k = F.k + 1
	end
end

-- packedStop runs F.packedRun(general) and returns nil; on a Cluster,
-- where an error may stop the batch part way, it returns the reply then:
-- the checks decided, then the error.
function F.packedStop(general)
	if ARGV[3] == 'p' then
		return F.packedRun(general)
	end
	local ok, e = pcall(F.packedRun, general)
	if not ok then
		if type(e) == 'table' then
			e = e.err
		end
		return { table.concat(F.out), tostring(e) }
	end
end

-- packedReply is the reply of a packed batch decided to the end: its
-- checks' packed replies, one bulk string; on a Cluster, in an array of
-- one (an error would be a second element).
function F.packedReply()
	if ARGV[3] == 'p' then
		return table.concat(F.out)
	end
	return { table.concat(F.out) }
end

if ARGV[3] == 'p' or ARGV[3] == 'P' then
	F.m, F.n = tonumber(ARGV[4]), tonumber(ARGV[2])
	local D = {}
	for i = 1, F.m do
		D[i] = { struct.unpack('<dddddddd', ARGV[4 + i]) }
	end
	F.out, F.D, F.k, F.emit = {}, D, 0, F.emitPacked
	if ARGV[3] == 'P' then
		F.K = ARGV
	end
	local r = F.packedStop(false)
	if r then
		return r
	end
	if F.k == F.n then
		return F.packedReply()
	end
end

-- A limit: the i-th of a check whose limits are described from F.A[base]
-- on (F.A is ARGV, or the arguments a packed check stands for), and while
-- deciding, its state relative to now.
-- A limit that charges denied checks (cd) counts up to top = rate + 1 in a
-- window, "over"; other limits up to top = rate.
function F.limitAt(base, i)
	local b = base - 1 + (i - 1) * 10
	local l = {
		key = F.K[tonumber(F.A[b + 1])],
		field = F.A[b + 2],
		algo = tonumber(F.A[b + 3]),
		rate = tonumber(F.A[b + 4]),
		burst = tonumber(F.A[b + 5]),
		period = tonumber(F.A[b + 6]),
		interval = tonumber(F.A[b + 7]),
		unit = tonumber(F.A[b + 8]),
		pair = tonumber(F.A[b + 9]),
		shape = F.A[b + 10] == '1',
		cd = F.A[b + 10] == '2',
	}
	l.top = l.rate
	if l.cd then
		l.top = l.rate + 1
	end
	return l
end

function F.never(remaining, reset)
	return { false, math.max(remaining, 0), math.max(reset, 0), -1, 0 }
end

-- States. A one-word state is an instant (s, n), or nil when fresh; the
-- two-word sliding window counter adds count c2. A log is a list of
-- entries {s, n, count}.

function F.isLog(l)
	return l.algo == 5 or l.algo == 7
end

function F.load(l)
	if F.isLog(l) then
		local v = redis.call('GET', l.key)
		local log = {}
		if v then
			for at, c in string.gmatch(v, '(%d+):(%d+)') do
				local s, n = F.parse(at)
				log[#log + 1] = { s, n, tonumber(c) }
			end
		end
		return { log = log }
	end
	local v = redis.call('HGET', l.key, l.field)
	if not v then
		return {}
	end
	return F.word(v)
end

-- word parses a hash value: an instant, or an instant and a count.
function F.word(v)
	local i = string.find(v, ':', 1, true)
	if i then
		local s, n = F.parse(string.sub(v, 1, i - 1))
		return { s = s, n = n, c2 = tonumber(string.sub(v, i + 1)) }
	end
	local s, n = F.parse(v)
	return { s = s, n = n }
end

-- rel is a one-word state's instant minus now (-9007199254740992 when fresh).
function F.rel(st)
	if not st.s then
		return -9007199254740992
	end
	return F.diff(st.s, st.n, F.ns, F.nn)
end

function F.at(d)
	local s, n = F.add(F.ns, F.nn, d)
	return { s = s, n = n }
end

-- The bucket algorithms on the general path: F.buckets on a state table.
function F.bucket(l, st, c)
	local nd, ok, rem, reset, retry, delay = buckets[l.algo](F.rel(st), c, l.burst, l.interval, l.shape)
	if nd then
		st = F.at(nd)
	end
	return st, { ok, rem, reset, retry, delay }
end

function F.refundTime(l, st, c)
	local d = F.rel(st)
	if d <= 0 then
		return st
	end
	return F.at(math.max(d - c * l.interval, 0))
end

-- The window and log algorithms are defined on first use: a closure costs
-- every script call, and most calls need only the buckets.

function F.loadWindows()
	if F.fixedWindow then
		return
	end
	function F.fmod(a, b)
		return a - F.fdiv(a, b) * b
	end

	-- bits returns the binary digits of an integer 0 <= x < 2^53, least
	-- significant first.
	function F.bits(x)
		local bits = {}
		while x > 0 do
			local bit = x % 2
			bits[#bits + 1] = bit
			x = (x - bit) / 2
		end
		return bits
	end

	-- mulmod is (a * b) mod m for 0 <= a, b < m < 2^52, by doubling.
	function F.mulmod(a, b, m)
		local r = 0
		local bits = F.bits(b)
		for i = #bits, 1, -1 do
			r = r * 2
			if r >= m then
				r = r - m
			end
			if bits[i] == 1 then
				r = r + a
				if r >= m then
					r = r - m
				end
			end
		end
		return r
	end

	-- muldiv is floor (or, with up, ceil) of a * b / c, capped at limit, for
	-- integers 0 <= a, b < 2^53, 0 < c < 2^52 and limit < 2^52.
	function F.muldiv(a, b, c, limit, up)
		local q = 0
		local bq = F.fdiv(b, c)
		if bq > 0 and a > 0 then
			if a * bq > limit then
				return limit
			end
			q = a * bq
			b = b - bq * c
		end
		local bits = F.bits(a)
		local p, r = 0, 0 -- prefix(a) * b = p * c + r, r < c
		for i = #bits, 1, -1 do
			p = p * 2
			r = r * 2
			if r >= c then
				p = p + 1
				r = r - c
			end
			if bits[i] == 1 then
				r = r + b
				if r >= c then
					p = p + 1
					r = r - c
				end
			end
			if q + p > limit then
				return limit
			end
		end
		q = q + p
		if up and r > 0 then
			q = q + 1
		end
		if q > limit then
			return limit
		end
		return q
	end

	-- wmod is (s, n) mod period: the time since the start of the window.
	function F.wmod(s, n, period)
		if F.fmod(period, 1000000000) == 0 then
			return F.fmod(s, period / 1000000000) * 1000000000 + n
		elseif F.fmod(1000000000, period) == 0 then
			return F.fmod(n, period)
		end
		return F.fmod(F.mulmod(F.fmod(s, period), F.fmod(1000000000, period), period) + n, period)
	end

	-- window returns the start of the window of st's instant relative to now
	-- (nil when fresh) and the offset of st's instant in that window.
	function F.window(l, st)
		if not st.s then
			return nil, 0
		end
		local m = F.wmod(st.s, st.n, l.period)
		return F.rel(st) - m, m
	end

	-- startOf returns, relative to now, the start of the window that holds
	-- now + shift. A check moves now up to its stored window's start (shift
	-- > 0) if the clock stepped back, as algo's notBeforeWindow does.
	function F.startOf(l, shift)
		local s, n = F.add(F.ns, F.nn, shift)
		return shift - F.wmod(s, n, l.period) -- the window start relative to now
	end

	-- windowAt returns st's window start and offset (see window), and the
	-- shift and the start of the window that a check at now works in.
	function F.windowAt(l, st)
		local ws, m = F.window(l, st)
		local shift = 0
		if ws and ws > 0 then
			shift = ws
		end
		return ws, m, shift, F.startOf(l, shift)
	end

	function F.fixedWindow(l, st, c)
		local rate, period = l.rate, l.period
		local ws, m, shift, start = F.windowAt(l, st)
		local count = 0
		if ws == start then
			count = F.fdiv(m, l.unit)
		end
		local reset = start + period - shift
		if c > rate or count + c > rate then
			if l.cd and c > 0 and count < l.top then
				-- Denied, and charged: count + c > rate saturates at top.
				count = l.top
				st = F.at(start + count * l.unit)
			end
			if c > rate then
				if count == 0 then
					reset = 0
				end
				return st, F.never(rate - count, reset)
			end
			return st, { false, math.max(rate - count, 0), reset, reset, 0 }
		end
		count = count + c
		if c > 0 then
			st = F.at(start + count * l.unit)
		end
		if count == 0 then
			reset = 0
		end
		return st, { true, rate - count, reset, 0, 0 }
	end

	function F.refundFixedWindow(l, st, c)
		local ws, m, _, start = F.windowAt(l, st)
		if not ws or ws ~= start then
			return st
		end
		local count = F.fdiv(m, l.unit)
		if count == 0 then
			return st
		end
		return F.at(start + math.max(count - c, 0) * l.unit)
	end

	-- counts returns a sliding window counter's (curr, prev) for the window
	-- starting at start, from st whose window starts at ws with offset m.
	function F.counts(l, st, ws, m, start)
		if not ws then
			return 0, 0
		end
		local c, pv
		if l.pair > 0 then
			local x = F.fdiv(m, l.pair)
			c, pv = F.fmod(x, l.top + 1), F.fdiv(x, l.top + 1)
		else
			c, pv = F.fdiv(m, l.unit), st.c2 or 0
		end
		if ws == start then
			return c, pv
		elseif ws == start - l.period then
			return 0, c
		end
		return 0, 0
	end

	function F.swcState(l, start, curr, prev)
		if l.pair > 0 then
			return F.at(start + (prev * (l.top + 1) + curr) * l.pair)
		end
		local st = F.at(start + curr * l.unit)
		st.c2 = prev
		return st
	end

	function F.swcReset(start, period, shift, curr, prev)
		if curr > 0 then
			return start + 2 * period - shift
		elseif prev > 0 then
			return start + period - shift
		end
		return 0
	end

	function F.slidingWindowCounter(l, st, c)
		local rate, period = l.rate, l.period
		local ws, m, shift, start = F.windowAt(l, st)
		local curr, prev = F.counts(l, st, ws, m, start)
		local elapsed = shift - start
		local weighted = F.muldiv(prev, period - elapsed, period, l.top, true)
		if l.cd and c > 0 and curr < l.top and (c > rate or weighted + curr + c > rate) then
			-- Denied, and charged, up to top.
			curr = math.min(curr + math.min(c, l.top), l.top)
			st = F.swcState(l, start, curr, prev)
		end
		local reset = F.swcReset(start, period, shift, curr, prev)
		if c > rate then
			return st, F.never(rate - weighted - curr, reset)
		end
		if weighted + curr + c > rate then
			-- retry: see algo's slidingWindowRetry, in time since the window's start.
			local retry
			local room = rate - curr - c
			if room >= 0 and prev > 0 then
				local a = period - F.muldiv(room, period, prev, period, false)
				if a < period then
					retry = math.max(a - elapsed, 0)
				end
			end
			if not retry then
				room = rate - c
				local a = 0
				if curr > room then
					a = period - F.muldiv(room, period, curr, period, false)
				end
				retry = period + a - elapsed
			end
			return st, { false, math.max(rate - weighted - curr, 0), reset, retry, 0 }
		end
		curr = curr + c
		if c > 0 then
			st = F.swcState(l, start, curr, prev)
		end
		return st, { true, rate - weighted - curr, F.swcReset(start, period, shift, curr, prev), 0, 0 }
	end

	function F.refundSlidingWindowCounter(l, st, c)
		local ws, m, _, start = F.windowAt(l, st)
		if not ws then
			return st
		end
		local curr, prev = F.counts(l, st, ws, m, start)
		if curr == 0 and prev == 0 then
			return st
		end
		local take = math.min(c, curr)
		curr = curr - take
		prev = math.max(prev - (c - take), 0)
		return F.swcState(l, start, curr, prev)
	end
end

function F.loadLogs()
	if F.slidingWindowLog then
		return
	end
	function F.dropThrough(log, d) -- drop entries at or before now + d
		local out = {}
		for _, e in ipairs(log) do
			if F.diff(e[1], e[2], F.ns, F.nn) > d then
				out[#out + 1] = e
			end
		end
		return out
	end

	function F.sum(log)
		local total = 0
		for _, e in ipairs(log) do
			total = total + e[3]
		end
		return total
	end

	-- freedAt returns, relative to now, the instant by which count units of
	-- the log have left it.
	function F.freedAt(log, count)
		for _, e in ipairs(log) do
			count = count - e[3]
			if count <= 0 then
				return F.diff(e[1], e[2], F.ns, F.nn)
			end
		end
		if #log == 0 then
			return -9007199254740992
		end
		local e = log[#log]
		return F.diff(e[1], e[2], F.ns, F.nn)
	end

	function F.append(log, d, count)
		local s, n = F.add(F.ns, F.nn, d)
		local last = log[#log]
		if last and F.diff(last[1], last[2], s, n) > 0 then
			s, n = last[1], last[2]
		end
		log[#log + 1] = { s, n, count }
	end

	function F.lastRel(log)
		local e = log[#log]
		return F.diff(e[1], e[2], F.ns, F.nn)
	end

	function F.slidingWindowLog(l, st, c)
		local rate, period = l.rate, l.period
		local log = F.dropThrough(st.log, -period)
		local used = F.sum(log)
		local reset = 0
		if #log > 0 then
			reset = F.lastRel(log) + period
		end
		if c > rate then
			return { log = log }, F.never(rate - used, reset)
		end
		local over = used + c - rate
		if over > 0 then
			return { log = log }, { false, math.max(rate - used, 0), reset, math.max(F.freedAt(log, over) + period, 0), 0 }
		end
		if c > 0 then
			F.append(log, 0, c)
			reset = math.max(reset, period)
		end
		return { log = log }, { true, rate - used - c, reset, 0, 0 }
	end

	function F.concurrency(l, st, c)
		local rate, period = l.rate, l.period
		local log = F.dropThrough(st.log, 0)
		local active = F.sum(log)
		local reset = 0
		if #log > 0 then
			reset = F.lastRel(log)
		end
		if c > rate then
			return { log = log }, F.never(rate - active, reset)
		end
		local over = active + c - rate
		if over > 0 then
			return { log = log }, { false, math.max(rate - active, 0), reset, math.max(F.freedAt(log, over), 0), 0 }
		end
		if c > 0 then
			F.append(log, period, c)
			reset = F.lastRel(log)
		end
		return { log = log }, { true, rate - active - c, reset, 0, 0 }
	end

	function F.refundLog(l, st, c)
		local log
		if l.algo == 5 then
			log = F.dropThrough(st.log, -l.period)
			while c > 0 and #log > 0 do -- the newest first
				local e = log[#log]
				local take = math.min(c, e[3])
				e[3] = e[3] - take
				c = c - take
				if e[3] == 0 then
					log[#log] = nil
				end
			end
			return { log = log }
		end
		log = F.dropThrough(st.log, 0)
		local out = {}
		for _, e in ipairs(log) do -- the oldest first
			local take = math.min(c, e[3])
			c = c - take
			if e[3] > take then
				out[#out + 1] = { e[1], e[2], e[3] - take }
			end
		end
		return { log = out }
	end
end

-- expiry returns, relative to now, the instant from which st equals a
-- fresh state (<= 0: it does now).
function F.expiry(l, st)
	if F.isLog(l) then
		if #st.log == 0 then
			return -9007199254740992
		end
		if l.algo == 5 then
			return F.lastRel(st.log) + l.period
		end
		return F.lastRel(st.log)
	end
	if not st.s then
		return -9007199254740992
	end
	if l.algo <= 3 then
		return F.rel(st)
	end
	local ws, m = F.window(l, st)
	if l.algo == 4 then
		if F.fdiv(m, l.unit) == 0 then
			return -9007199254740992
		end
		return ws + l.period
	end
	local curr, prev = F.counts(l, st, ws, m, ws)
	if curr > 0 then
		return ws + 2 * l.period
	elseif prev > 0 then
		return ws + l.period
	end
	return -9007199254740992
end

local checks = { F.bucket, F.bucket, F.bucket }

-- need makes sure algorithm a's functions are defined.
function F.need(a)
	if a >= 4 and not checks[4] then
		F.loadWindows()
		F.loadLogs()
		checks[4], checks[5], checks[6], checks[7] = F.fixedWindow, F.slidingWindowLog, F.slidingWindowCounter, F.concurrency
	end
end

function F.refundOf(l, st, c)
	if l.algo <= 3 then
		return F.refundTime(l, st, c)
	elseif l.algo == 4 then
		return F.refundFixedWindow(l, st, c)
	elseif l.algo == 6 then
		return F.refundSlidingWindowCounter(l, st, c)
	end
	return F.refundLog(l, st, c)
end

-- save stores st for l (whose state was old), or deletes it once it is
-- fresh, and keeps the key's TTL at least until st expires.
function F.save(l, st, old)
	local e = F.expiry(l, st)
	if e <= 0 then
		if F.isLog(l) then
			redis.call('DEL', l.key)
		else
			redis.call('HDEL', l.key, l.field)
		end
		return
	end
	if F.isLog(l) then
		local ttl = math.floor(e / 1000000) + 1
		if F.pinned then
			ttl = math.max(ttl, 600000) -- see F.extend
		end
		local parts = {}
		for i, x in ipairs(st.log) do
			parts[i] = F.fmt(x[1], x[2]) .. ':' .. string.format('%d', x[3])
		end
		redis.call('SET', l.key, table.concat(parts, ','), 'PX', ttl)
		return
	end
	local v = F.fmt(st.s, st.n)
	if st.c2 then
		v = v .. ':' .. string.format('%d', st.c2)
	end
	local added = redis.call('HSET', l.key, l.field, v) == 1
	local oe = 0
	if old.s then
		oe = F.expiry(l, old)
	end
	if not F.extend(l.key, e, old.s ~= nil, oe) and added then
		F.sweep(l.key, l.field, function(w)
			return F.expiry(l, F.word(w))
		end)
	end
end

-- check decides a check of cost under its L limits, described from
-- ARGV[base] on, and returns its reply; the same key and limit twice is
-- charged twice. mode is "c", or "r" to refund cost, or "d" to charge the
-- limits with cd as a denied check does (see ARGV[3]).
function F.check(base, cost, L, mode)
	local refund, denied = mode == 'r', mode == 'd'
	local limits, ids, states, orig, results = {}, {}, {}, {}, {}
	local allowed = not denied
	for i = 1, L do
		local l = F.limitAt(base, i)
		limits[i] = l
		if not denied or l.cd then
			F.need(l.algo)
			local id = 1
			if L > 1 then
				id = l.key .. '\0' .. l.field
			end
			ids[i] = id
			local st = states[id]
			if not st then
				st = F.load(l)
				orig[id] = st
			end
			if refund then
				-- No state holds more than two capacities' worth of units
				-- (one more each with cd).
				local capacity = l.rate
				if l.algo <= 3 then
					capacity = l.burst
				end
				if l.cd then
					capacity = capacity + 1
				end
				states[id] = F.refundOf(l, st, math.min(cost, 2 * capacity))
			else
				local nst, res = checks[l.algo](l, st, cost)
				states[id] = nst
				results[i] = { id, res }
				allowed = allowed and res[1]
			end
		end
	end

	if refund then
		local done = {}
		for i = 1, L do
			local id = ids[i]
			if not done[id] then
				done[id] = true
				F.save(limits[i], states[id], orig[id])
			end
		end
		return 0
	end

	-- Allowed, every limit is charged; denied, those with cd only, and
	-- only if that changed their state (a window already over stays so).
	if cost > 0 then
		local done = {}
		for i = L, 1, -1 do
			local id = ids[i]
			if (allowed or limits[i].cd and states[id] ~= orig[id]) and not done[id] then
				done[id] = true
				F.save(limits[i], states[id], orig[id])
			end
		end
	end
	if denied then
		return 0
	end

	local reply = { 0 }
	if allowed then
		reply[1] = 1
	end
	for i = 1, L do
		local res = results[i][2]
		if not allowed and res[1] then
			-- A limit that would have allowed reports itself as it was,
			-- peeked at with cost 0, even if it was charged (cd): only a
			-- limit that denied binds a denied decision.
			local _, peek = checks[limits[i].algo](limits[i], orig[results[i][1]], 0)
			res = peek
		end
		local ok = 0
		if res[1] then
			ok = 1
		end
		reply[#reply + 1] = ok
		reply[#reply + 1] = res[2]
		reply[#reply + 1] = res[3]
		reply[#reply + 1] = res[4]
		reply[#reply + 1] = res[5]
	end
	return reply
end

-- A batch: ARGV[2] checks, each described from its own ARGV index on by
-- its cost, its number of limits L and L × 10 limit arguments; the reply
-- is theirs, one after another. Each check is decided as if it were a
-- call of its own, after the ones before it. The first F.k checks, fixed
-- windows all, were decided at the start of the script.
if ARGV[3] == 'b' then
	local out, b = F.out, F.b
	for _ = F.k + 1, tonumber(ARGV[2]) do
		local cost, L = tonumber(ARGV[b]), tonumber(ARGV[b + 1])
		if not (L == 1 and F.fixedAt(b + 2, cost, out)) then
			local r
			if L == 1 then
				r = F.fast(b + 2, cost)
			end
			if not r then
				r = F.check(b + 2, cost, L, 'c')
			end
			for _, x in ipairs(r) do
				out[#out + 1] = x
			end
		end
		b = b + 2 + 10 * L
	end
	return out
end

-- The rest of a packed batch (see ARGV[3] == 'p' above): a check that is
-- not decided on the way is decided on the general path, from the
-- arguments it stands for.
if ARGV[3] == 'p' or ARGV[3] == 'P' then
	return F.packedStop(true) or F.packedReply()
end

return F.check(5, tonumber(ARGV[2]), tonumber(ARGV[4]), ARGV[3])
