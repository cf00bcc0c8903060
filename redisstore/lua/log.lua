-- log.lua: the state of the log algorithms (sliding window log,
-- concurrency) — Go's State.Log, entries of an instant and a count, oldest
-- first — kept in a sorted set of its own key, so that a check costs a
-- few operations of O(log n) whatever the entries in the window:
--
--   member "<instant, 20 digits>:<count>", score the instant in whole
--   milliseconds (exact in a double; members of one millisecond sort by
--   their exact instants); entries of one instant are one member, whose
--   count is their sum (decisions are the same as for separate entries);
--   member "#", score −(total + 1): the sum of the counts, kept by
--   ZINCRBY, below every entry.
--
-- A log object reads the set as needed; what a check appends stays
-- pending until the check is committed (commit) or dropped with it.
-- Dropping aged-out entries and refunds write at once: they change no
-- decision but the state. Instants a log hands out are relative to now,
-- in its limit's ticks (time.lua); a stored instant is rewritten only
-- from its own digits.

local L = {}
L.__index = L

local function member(inst, count)
	return inst .. ':' .. string.format('%d', count)
end

-- entry returns a member's instant (its 20 digits) and count.
local function entry(m)
	local i = string.find(m, ':', 1, true)
	return string.sub(m, 1, i - 1), tonumber(string.sub(m, i + 1))
end

-- score returns an instant's score: its first 14 of 20 digits, in ms.
local function score(inst)
	return tonumber(string.sub(inst, 1, 14))
end

-- instant writes now + d (ticks of p) in 20 digits.
local function instant(p, d)
	local s = T.raw(p, d)
	return string.rep('0', 20 - #s) .. s
end

function L.open(key, p)
	local sc = R('ZSCORE', key, '#')
	local total = 0
	if sc then
		total = -tonumber(sc) - 1
	end
	return setmetatable({ key = key, p = p, total = total, has = sc ~= false, pend = {} }, L)
end

-- view returns the log without what is pending: the state before the
-- check, for a peek.
function L:view()
	return setmetatable({ key = self.key, p = self.p, total = self.total, has = self.has, pend = {} }, L)
end

-- adjust adds delta to the stored total.
function L:adjust(delta)
	if delta == 0 then
		return
	end
	self.total = self.total + delta
	if self.has then
		R('ZINCRBY', self.key, -delta, '#')
	else
		R('ZADD', self.key, -(self.total + 1), '#')
		self.has = true
	end
end

-- dropThrough removes the entries at or before now + d.
function L:dropThrough(d)
	local p = self.p
	local found = R('ZRANGEBYSCORE', self.key, 0, T.ms(p, d))
	local gone, freed = {}, 0
	for _, m in ipairs(found) do
		local at, c = entry(m)
		if T.rel(p, at) <= d then
			gone[#gone + 1] = m
			freed = freed + c
		end
	end
	for i = 1, #gone, 1000 do
		R('ZREM', self.key, unpack(gone, i, math.min(i + 999, #gone)))
	end
	self:adjust(-freed)
	local kept = {}
	for _, e in ipairs(self.pend) do
		if e.d > d then
			kept[#kept + 1] = e
		end
	end
	self.pend = kept
end

function L:sum()
	local s = self.total
	for _, e in ipairs(self.pend) do
		s = s + e.count
	end
	return s
end

-- stored returns the stored newest entry's member, instant and count.
function L:stored()
	local r = R('ZRANGE', self.key, -1, -1)
	if #r == 0 or r[1] == '#' then
		return nil
	end
	local at, c = entry(r[1])
	return r[1], at, c
end

-- newest returns the newest entry's instant relative to now (nil: none).
function L:newest()
	local n = #self.pend
	if n > 0 then
		return self.pend[n].d
	end
	local m, at = self:stored()
	if m == nil then
		return nil
	end
	return T.rel(self.p, at)
end

-- freedAt returns, relative to now, the instant by which the oldest
-- entries hold count units (the newest entry's when they hold fewer; far
-- in the past when the log is empty).
function L:freedAt(count)
	local p = self.p
	local last
	local off = 0
	while true do
		local r = R('ZRANGEBYSCORE', self.key, 0, '+inf', 'LIMIT', off, 64)
		for _, m in ipairs(r) do
			local at, c = entry(m)
			count, last = count - c, T.rel(p, at)
			if count <= 0 then
				return last
			end
		end
		if #r < 64 then
			break
		end
		off = off + 64
	end
	for _, e in ipairs(self.pend) do
		count, last = count - e.count, e.d
		if count <= 0 then
			return e.d
		end
	end
	if last == nil then
		return -FAR
	end
	return last
end

-- append adds count units at now + d, or at the newest entry's instant if
-- that is later (a clock that stepped back), pending.
function L:append(d, count)
	local n = #self.pend
	if n > 0 then
		local e = self.pend[n]
		if d <= e.d then
			e.count = e.count + count
			return
		end
	else
		local m, at, sc = self:stored()
		if m ~= nil then
			local sd = T.rel(self.p, at)
			if d <= sd then
				self.pend[1] = { d = sd, inst = at, count = count, merge = m, base = sc }
				return
			end
		end
	end
	self.pend[n + 1] = { d = d, count = count }
end

-- moveNewest adds count units to the newest entry, moved to now if it
-- lies before now.
function L:moveNewest(count)
	self:commit()
	local m, at, c = self:stored()
	if m ~= nil and T.rel(self.p, at) < 0 then
		R('ZREM', self.key, m)
		self:adjust(-c)
		count = count + c
	end
	self:append(0, count)
end

-- commit writes what is pending.
function L:commit()
	local added = 0
	for _, e in ipairs(self.pend) do
		local c = e.count
		if e.merge then
			R('ZREM', self.key, e.merge)
			c = c + e.base
		end
		local inst = e.inst or instant(self.p, e.d)
		R('ZADD', self.key, score(inst), member(inst, c))
		added = added + e.count
	end
	self.pend = {}
	self:adjust(added)
end

-- take removes up to n units from the entries, the newest first (newest)
-- or the oldest first; what is pending is committed first.
function L:take(n, newest)
	self:commit()
	local freed = 0
	while n > 0 do
		local r
		if newest then
			r = R('ZRANGE', self.key, -1, -1)
		else
			r = R('ZRANGEBYSCORE', self.key, 0, '+inf', 'LIMIT', 0, 1)
		end
		if #r == 0 or r[1] == '#' then
			break
		end
		local at, c = entry(r[1])
		local t = math.min(n, c)
		R('ZREM', self.key, r[1])
		if c > t then
			R('ZADD', self.key, score(at), member(at, c - t))
		end
		n, freed = n - t, freed + t
	end
	self:adjust(-freed)
end

function L:takeNewest(n)
	self:take(n, true)
end

function L:takeOldest(n)
	self:take(n, false)
end

-- save commits the log and keeps its key until expiry (relative to now;
-- nil: the log is empty, and the key goes).
function L:save(expiry)
	self:commit()
	if expiry == nil or expiry <= 0 then
		R('DEL', self.key)
		return
	end
	local p = self.p
	if T.pinned then
		-- Redis expires keys on its own clock, which a pinned time does
		-- not drive: keep them for the test instead.
		R('PEXPIRE', self.key, math.max(fdiv(expiry, p.ms) + 1, 600000))
		return
	end
	R('PEXPIREAT', self.key, T.ms(p, expiry) + 1)
end
