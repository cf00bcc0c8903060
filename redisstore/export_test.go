package redisstore

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer/algo"
	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer"
)

// UseClient makes the store made from o use c, which it does not close,
// instead of connecting to o.URL or with o.Client.
func UseClient(o *Options, c rueidis.Client) { o.conn = c }

// PinClock makes the store made from o decide at now() instead of Redis's
// TIME, so that the conformance suite's fake clock drives it.
func PinClock(o *Options, now func() time.Time) { o.now = now }

// LimitID is limitID, the name of a limit's state in Redis keys.
func LimitID(l bouncer.Limit) string { return limitID(l) }

// StateOf returns the Redis key that holds key's state under l in s, and
// its hash field (for a one-word state).
func StateOf(s *Store, l bouncer.Limit, key string) (rkey, field string) {
	d := digestOf(key, s.buckets)
	if l.Algorithm == bouncer.SlidingWindowLog || l.Algorithm == bouncer.Concurrency {
		return s.logKey(limitID(l), d), ""
	}
	return s.hashKey(limitID(l), d.bucket), string(d.field[:])
}

// KeySlot is keySlot, the Cluster slot of a key.
func KeySlot(key string) uint16 { return keySlot(key) }

// SetHealthHooks makes the store made from o run its breakers on clock
// and probe its nodes with ping (nil: the real one) instead of a PING.
func SetHealthHooks(o *Options, clock func() time.Time, ping func(ctx context.Context, addr string) error) {
	o.clock, o.ping = clock, ping
}

// Guarded reports whether s's calls run guarded now (see guardFor).
func Guarded(s *Store) bool { return time.Since(epoch) < time.Duration(s.guardUntil.Load()) }

// Settle waits until no liveness probe of s is in flight (and, for a
// store still connecting, until it connects or closes).
func Settle(s *Store) { s.breakers.wg.Wait() }

// GuardKeys makes the store made from o run a library whose every
// command about a key fails unless the key is one of the call's KEYS.
func GuardKeys(o *Options) { o.lib = newLibrary(keyGuard) }

// keyGuard is call.lua's stand-in for GuardKeys.
const keyGuard = `local KEYS, ARGV
local function R(cmd, key, ...)
	for _, k in ipairs(KEYS) do
		if k == key then
			return redis.call(cmd, key, ...)
		end
	end
	error('undeclared key: ' .. tostring(key))
end
local function enter(keys, args)
	KEYS, ARGV = keys, args
end
`

// ComposeLua returns a script for EVAL of the store's library code, with
// call.lua, then the entry point entry (the source of a test's own), run
// with the call's clock read (ARGV[1], as the library's calls take it).
func ComposeLua(entry string) string { return composeEval(luaSource("call.lua"), entry) }

// LuaFiles lists the files of lua/ and their sizes in lines.
func LuaFiles() map[string]int {
	out := map[string]int{}
	entries, _ := luaFiles.ReadDir("lua")
	for _, e := range entries {
		src := luaSource(e.Name())
		n := 0
		for _, c := range src {
			if c == '\n' {
				n++
			}
		}
		out[e.Name()] = n
	}
	return out
}

// WaitLanes waits until no goroutine of s's lanes runs (nor a read of a
// Cluster's map of slots): a lane's goroutine hands its call back to the
// lane after the checks of its last batch have their replies.
func WaitLanes(s *Store) { s.wg.Wait() }

// LaneInFlight is how many calls each of s's lanes has in flight.
func LaneInFlight(s *Store) []int {
	n := make([]int, len(s.lanes))
	for i := range s.lanes {
		s.lanes[i].mu.Lock()
		n[i] = s.lanes[i].inflight
		s.lanes[i].mu.Unlock()
	}
	return n
}

// GroupOf returns the group of key in a store of DefaultBuckets and
// DefaultGroups.
func GroupOf(key string) int { return int(digestOf(key, DefaultBuckets).bucket % DefaultGroups) }

// LimitDef is a limit's definition as the library reads it.
func LimitDef(l bouncer.Limit, now int64) string {
	li := &limitInfo{}
	li.def, _ = limitDef(l)
	if l.Calendar.IsZero() {
		return li.def
	}
	p := algo.Prepare(l)
	li.cal = &p
	return li.calDef(now)
}

// CheckCall returns the keys and arguments of one check call deciding rs,
// each a request of one group.
func CheckCall(s *Store, rs []bouncer.Request) (keys, args []string, err error) {
	var cs []*part
	for _, r := range rs {
		planned, err := s.plan(r)
		if err != nil {
			return nil, nil, err
		}
		for i := range planned {
			cs = append(cs, &planned[i])
		}
	}
	keys, args = s.encode(opCheck, cs)
	return keys, args, nil
}

// CheckLoopScript is a script that runs the check function on its KEYS
// and ARGV (but the last, a count) that many times in one call, and
// returns the microseconds it took.
func CheckLoopScript() string {
	return composeEval(luaSource("call.lua"), luaSource("check.lua")+`
local loops = tonumber(ARGV[#ARGV])
local t0 = redis.call('TIME')
for _ = 1, loops do
	checkCall(KEYS, ARGV)
end
local t1 = redis.call('TIME')
return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
`)
}

// ResetFirst loads on c a library of the store's code under a name of
// its own, so that nothing has called it yet, makes its first call a
// reset of key's field under l, deletes the library again, and returns
// the reset's error.
func ResetFirst(ctx context.Context, c rueidis.Client, l bouncer.Limit, key string) error {
	lib := newLibrary(luaSource("call.lua") + "\n-- " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
	if err := lib.load(ctx, c); err != nil {
		return err
	}
	defer func() {
		for _, n := range c.Nodes() {
			n.Do(ctx, n.B().FunctionDelete().LibraryName("bouncer_"+strings.TrimPrefix(lib.check, "bouncer_check_")).Build())
		}
	}()
	def, _ := limitDef(l)
	arg := "\x01\x01\x00\x01\x0012345678" // one reference: definition 1, key 1, its field
	return fcall(ctx, c, lib.reset, []string{key}, []string{"", "1", def, "1", arg}).Error()
}

// OnTLSReload makes the store made from o tell f of every reload of its
// TLS files, with its error.
func OnTLSReload(o *Options, f func(error)) { o.tlsReloaded = f }

// TLSClientCert returns the client certificate s's TLS presents now.
func TLSClientCert(s *Store) *x509.Certificate {
	if c := s.tls.cur.Load().cert; c != nil {
		return c.Leaf
	}
	return nil
}

// TLSRootsPEM returns the CA bundle s's TLS trusts now, as read.
func TLSRootsPEM(s *Store) []byte { return s.tls.cur.Load().caPEM }

// PingTLS makes one connection to addr as s's client makes its own, and
// sends it a PING: with TLS 1.3 a server refuses a client's certificate
// only after the client's side of the handshake is done.
func PingTLS(ctx context.Context, s *Store, addr string) error {
	c, err := s.tls.dial(ctx, addr, &net.Dialer{}, s.tls.conf)
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING: got %q", line)
	}
	return nil
}

// SharesKey returns the Redis hash of the shares of key under l in s.
func SharesKey(s *Store, l bouncer.Limit, key string) string {
	return s.sharesKey(limitID(l), digestOf(key, s.buckets))
}

// FreshLibrary makes the store made from o run a library of the store's
// code under a name no other store uses.
func FreshLibrary(o *Options) {
	o.lib = newLibrary(luaSource("call.lua") + "\n-- " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
}

// DeleteLibrary deletes s's library from every node c knows, as a node
// restarted without it would have it.
func DeleteLibrary(ctx context.Context, s *Store, c rueidis.Client) error {
	name := "bouncer_" + strings.TrimPrefix(s.lib.check, "bouncer_check_")
	for _, n := range c.Nodes() {
		err := n.Do(ctx, n.B().FunctionDelete().LibraryName(name).Build()).Error()
		if e, ok := rueidis.IsRedisErr(err); err != nil && !(ok && strings.HasPrefix(e.Error(), "READONLY")) {
			return err
		}
	}
	return nil
}
