package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The demands of a quota bucket's clients (rlqs.Demands) are one Redis
// hash per bucket, "<prefix>:demands:<digest of the bucket's key>", whose
// fields are the clients and whose values are "<epoch> <until> <demand>
// <until> <demand>": the epoch of the latest record, the latest record
// (its expiry in Unix ms, 0 once forgotten, and its demand), and the
// record as it stood when that epoch began. Epochs and expiries are read
// on Redis's clock, so that every instance agrees on them; the hash
// itself lives as long as its latest record. The field "#claimed" holds
// "<epoch> <sum>": what clients new in that epoch have claimed.
//
// recordDemand records ARGV[1]'s demand ARGV[4] for ARGV[3] ms, in epochs
// of ARGV[2] ms, and returns the epoch. An empty ARGV[4] forgets the
// client: its record keeps what it was when the epoch began, and the
// hash keeps its expiry (that of its latest demand, every demand's TTL
// being the same).
var recordDemand = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local e = math.floor(now / interval)
local prev = '0 0'
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old and ARGV[4] == '' then return e end
if old then
  local f = {}
  for w in string.gmatch(old, '%S+') do f[#f + 1] = w end
  if tonumber(f[1]) < e then prev = f[2] .. ' ' .. f[3] else prev = f[4] .. ' ' .. f[5] end
end
local cur = '0 0'
if ARGV[4] ~= '' then cur = string.format('%d', now + ttl) .. ' ' .. ARGV[4] end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', e) .. ' ' .. cur .. ' ' .. prev)
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ttl) end
return e
`)

// demandsAt returns each client's demand as it stood when epoch ARGV[1]
// (of ARGV[2] ms) began, and drops the records that have expired.
var demandsAt = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local e = tonumber(ARGV[1])
local start = e * tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if all[i] ~= '#claimed' then
    local f = {}
    for w in string.gmatch(all[i + 1], '%S+') do f[#f + 1] = w end
    local u, d = f[2], f[3]
    if tonumber(f[1]) >= e then u, d = f[4], f[5] end
    if tonumber(u) > start then
      out[#out + 1] = all[i]
      out[#out + 1] = d
    end
    if tonumber(f[2]) <= now and tonumber(f[4]) <= now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
return out
`)

// claim takes up to ARGV[3] of what epoch ARGV[1] left free (ARGV[2]),
// or gives -ARGV[3] back, and returns what it took.
var claim = rueidis.NewLuaScript(`
local e, free, amount = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local claimed = 0
local v = redis.call('HGET', KEYS[1], '#claimed')
if v then
  local sp = string.find(v, ' ', 1, true)
  local ce = tonumber(string.sub(v, 1, sp - 1))
  if ce > e then return '0' end
  if ce == e then claimed = tonumber(string.sub(v, sp + 1)) end
end
local got = amount
if amount > 0 then got = math.max(0, math.min(amount, free - claimed)) end
redis.call('HSET', KEYS[1], '#claimed', string.format('%d', e) .. ' ' .. string.format('%.17g', claimed + got))
return string.format('%.17g', got)
`)

func (s *Store) demandKey(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return s.prefix + ":demands:" + hex.EncodeToString(sum[:16])
}

// RecordDemand records client's demand for a quota bucket (requests a
// second) for ttl, and returns the epoch it was recorded in: Redis's
// Unix time divided by interval (rlqs.Demands). It fails within the
// store's Timeout.
func (s *Store) RecordDemand(ctx context.Context, bucket, client string, demand float64, interval, ttl time.Duration) (int64, error) {
	return s.recordDemand(ctx, bucket, client, strconv.FormatFloat(demand, 'g', -1, 64), interval, ttl)
}

// ForgetDemand forgets client's demand for a quota bucket from the next
// epoch on.
func (s *Store) ForgetDemand(ctx context.Context, bucket, client string, interval time.Duration) error {
	_, err := s.recordDemand(ctx, bucket, client, "", interval, interval)
	return err
}

func (s *Store) recordDemand(ctx context.Context, bucket, client, demand string, interval, ttl time.Duration) (int64, error) {
	if !s.ready.Load() {
		return 0, s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := recordDemand.Exec(ctx, s.client, []string{s.demandKey(bucket)},
		[]string{client, ms(interval), ms(ttl), demand}).AsInt64()
	if err != nil {
		return 0, wrap(err)
	}
	return e, nil
}

// DemandsAt returns the demand of every client of a quota bucket as it
// stood when epoch began (rlqs.Demands).
func (s *Store) DemandsAt(ctx context.Context, bucket string, epoch int64, interval time.Duration) (map[string]float64, error) {
	if !s.ready.Load() {
		return nil, s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	arr, err := demandsAt.Exec(ctx, s.client, []string{s.demandKey(bucket)},
		[]string{strconv.FormatInt(epoch, 10), ms(interval)}).ToArray()
	if err != nil {
		return nil, wrap(err)
	}
	out := make(map[string]float64, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		c, err1 := arr[i].ToString()
		v, err2 := arr[i+1].ToString()
		d, err3 := strconv.ParseFloat(v, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("redisstore: a demand record %q of %q: %w", v, c, errors.Join(err1, err2, err3))
		}
		out[c] = d
	}
	return out, nil
}

// Claim takes up to amount of what the division of a quota bucket in
// epoch left free, or gives -amount back (rlqs.Demands).
func (s *Store) Claim(ctx context.Context, bucket string, epoch int64, free, amount float64) (float64, error) {
	if !s.ready.Load() {
		return 0, s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := claim.Exec(ctx, s.client, []string{s.demandKey(bucket)},
		[]string{strconv.FormatInt(epoch, 10), strconv.FormatFloat(free, 'g', -1, 64), strconv.FormatFloat(amount, 'g', -1, 64)}).ToString()
	if err != nil {
		return 0, wrap(err)
	}
	got, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("redisstore: a claim of %q: %w", v, err)
	}
	return got, nil
}

// ms is d in whole milliseconds, at least one.
func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
