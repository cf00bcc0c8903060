package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The demands of a quota bucket's clients (rlqs.Demands) are one Redis
// hash per bucket, "<prefix>:demand:<digest of the bucket's key>", whose
// fields are the clients and whose values are "<expiry in Unix ms>
// <demand>". The expiry is read on Redis's clock, so that every instance
// expires a client alike; the hash itself lives as long as its latest
// record.
var shareDemand = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], (now + ttl) .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sp = string.find(v, ' ', 1, true)
  if sp and tonumber(string.sub(v, 1, sp - 1)) > now then
    live[#live + 1] = all[i]
    live[#live + 1] = string.sub(v, sp + 1)
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return live
`)

func (s *Store) demandKey(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return s.prefix + ":demand:" + hex.EncodeToString(sum[:16])
}

// ShareDemand records client's demand for a quota bucket (requests a
// second) for ttl, and returns the demand of every client of the bucket
// whose record has not expired, on Redis's clock: every instance on the
// same Redis sees the same clients (rlqs.Demands). It fails within the
// store's Timeout.
func (s *Store) ShareDemand(ctx context.Context, bucket, client string, demand float64, ttl time.Duration) (map[string]float64, error) {
	if !s.ready.Load() {
		return nil, s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ms := max(ttl.Milliseconds(), 1)
	arr, err := shareDemand.Exec(ctx, s.client, []string{s.demandKey(bucket)},
		[]string{client, strconv.FormatFloat(demand, 'g', -1, 64), strconv.FormatInt(ms, 10)}).ToArray()
	if err != nil {
		return nil, wrap(err)
	}
	out := make(map[string]float64, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		c, err1 := arr[i].ToString()
		v, err2 := arr[i+1].ToString()
		d, err3 := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("redisstore: a demand record %q of %q: %w", v, c, errors.Join(err1, err2, err3))
		}
		out[c] = d
	}
	return out, nil
}

// ForgetDemand drops client's demand for a quota bucket.
func (s *Store) ForgetDemand(ctx context.Context, bucket, client string) error {
	if !s.ready.Load() {
		return s.errConnecting()
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Do(ctx, s.client.B().Hdel().Key(s.demandKey(bucket)).Field(client).Build()).Error(); err != nil {
		return wrap(err)
	}
	return nil
}
