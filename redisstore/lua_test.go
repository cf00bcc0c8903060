package redisstore_test

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
	"github.com/bouncerhq/bouncer/storetest"
)

// The harness runs the library's algorithms themselves — A[code].check
// and A.refund of lua/, each the twin of its Go definition in package
// algo — on a real Redis, one call per sequence of steps. A one-word
// state travels between steps as the word the store would keep in its
// hash (encoded after a step that saves it, decoded before the next); a
// log state lives in a sorted set, KEYS[1], as the store keeps it.
//
// ARGV[2] is the limit's definition (algo.lua's params), then three
// arguments per step: the instant (Unix ns), "c" (check), "r" (refund)
// or "h" (charge), and the cost. Per step the reply holds six strings: allowed
// ("1" or "0"), remaining, reset-after, retry-after ("never") and delay
// (in the limit's ticks), then the state kept after the step: "" for a
// fresh one, a word, or a log's members and scores, "member=score" joined
// by spaces. A word more than FAR ticks ahead, which a check reads as
// fresh, is kept as it is.
const harnessLua = `
local p, alg
local key = KEYS[1]
local word = ''
local out = {}
local r = {}
local function fresh(st)
	if st == nil then
		return true
	end
	local e = alg.expiry(p, st)
	return e == nil or e <= 0
end
for i = 2, #ARGV, 4 do
	ARGV[1] = ARGV[i]
	T.init()
	p = A.params(ARGV[i + 3])
	alg = A[p.alg]
	local op, cost = ARGV[i + 1], tonumber(ARGV[i + 2])
	local st = nil
	if alg.log then
		st = L.open(key, p)
	elseif word ~= '' then
		st = alg.decode(p, word)
	end
	r.allowed, r.remaining, r.reset, r.retry, r.delay = false, 0, 0, 0, 0
	local save = true
	if op == 'r' then
		st = A.refund(p, st, cost)
	elseif op == 'h' then
		st = alg.charge(p, st, cost)
	else
		local orig = st
		st = alg.check(p, st, cost, r)
		save = cost > 0 and (r.allowed or p.cd and st ~= orig)
	end
	if save then
		if alg.log then
			st:save(alg.expiry(p, st))
		elseif fresh(st) then
			word = ''
		else
			word = alg.encode(p, st)
		end
	end
	local kept = ''
	if alg.log then
		local zs = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
		local parts = {}
		for j = 1, #zs, 2 do
			parts[#parts + 1] = zs[j] .. '=' .. zs[j + 1]
		end
		kept = table.concat(parts, ' ')
	elseif word ~= '' then
		local ds = alg.decode(p, word)
		if ds == nil or not fresh(ds) then
			kept = word
		end
	end
	local rs = 'never'
	if r.retry then
		rs = string.format('%d', r.retry)
	end
	local b = '0'
	if r.allowed then
		b = '1'
	end
	local n = #out
	out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] =
		b, string.format('%d', r.remaining), string.format('%d', r.reset), rs, string.format('%d', r.delay), kept
end
return out
`

var harnessScript = redisstore.ComposeLua(harnessLua)

// luaStep is one step of a harness sequence.
type luaStep struct {
	at     int64 // Unix ns
	cost   int64
	refund bool
	charge bool
}

// luaOutcome is a step's decision and the state kept after it, as the
// harness writes them.
type luaOutcome struct {
	want storetest.Want // the decision (nothing for a refund or a charge)
	kept string
}

// runLua runs steps under l on the harness, with key holding a log.
// tb is what runLua needs of a test: a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func runLua(t tb, c rueidis.Client, key string, l bouncer.Limit, steps []luaStep) []luaOutcome {
	t.Helper()
	args := []string{""}
	for _, s := range steps {
		op := "c"
		switch {
		case s.refund:
			op = "r"
		case s.charge:
			op = "h"
		}
		args = append(args, strconv.FormatInt(s.at, 10), op, strconv.FormatInt(s.cost, 10), redisstore.LimitDef(l, s.at))
	}
	ctx := context.Background()
	res, err := c.Do(ctx, c.B().Eval().Script(harnessScript).Numkeys(1).Key(key).Arg(args...).Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("harness under %+v: %v", l, err)
	}
	if len(res) != 6*len(steps) {
		t.Fatalf("harness: %d values for %d steps", len(res), len(steps))
	}
	out := make([]luaOutcome, len(steps))
	p := algo.Prepare(l)
	tick := p.Tick()
	for i := range steps {
		f := res[6*i : 6*i+6]
		num := func(s string) int64 {
			if s == "never" {
				return int64(bouncer.Never)
			}
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("step %d: %q is not an int64: %v", i, s, err)
			}
			return v
		}
		ticks := func(s string) time.Duration {
			if s == "never" {
				return bouncer.Never
			}
			return time.Duration(num(s) * tick)
		}
		out[i] = luaOutcome{
			want: storetest.Want{
				Allowed:    f[0] == "1",
				Remaining:  num(f[1]),
				ResetAfter: ticks(f[2]),
				RetryAfter: ticks(f[3]),
				Delay:      ticks(f[4]),
			},
			kept: f[5],
		}
		if steps[i].refund {
			out[i].want = storetest.Want{}
		}
	}
	return out
}

// keyOn returns a fresh key for a harness's log, the same on every run
// of a test but for its prefix.
func keyOn(name string) string { return freshPrefix() + ":" + name }

// Every row of the shared step tables, run on the Lua algorithms alone,
// gets the decision its table wants.
func TestLuaScenarios(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		for _, sc := range storetest.Scenarios() {
			t.Run(sc.Name, func(t *testing.T) {
				var steps []luaStep
				for _, st := range sc.Steps {
					steps = append(steps, luaStep{at: storetest.Start.Add(st.At).UnixNano(), cost: st.Cost, refund: st.Refund, charge: st.Charge})
				}
				got := runLua(t, c, keyOn("scenario"), sc.Limit, steps)
				for i, st := range sc.Steps {
					if !st.Refund && !st.Charge && got[i].want != st.Want {
						t.Errorf("step %d (at %v, cost %d): got %v, want %v", i, st.At, st.Cost, got[i].want, st.Want)
					}
				}
			})
		}
	})
}

// The Lua algorithms and package algo decide the same and keep the same
// state, step by step, at every magnitude a limit may have: rates and
// bursts up to 2^40, periods from a nanosecond to ten years, costs from
// 0 to past the capacity, refunds, and instants that jump far ahead (and
// sometimes back).
func TestLuaMatchesAlgo(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		for _, a := range []bouncer.Algorithm{
			bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket, bouncer.FixedWindow,
			bouncer.SlidingWindowLog, bouncer.SlidingWindowCounter, bouncer.Concurrency,
		} {
			t.Run(a.String(), func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) {
					l := drawLimit(rt, a)
					matchAlgo(rt, c, l)
				})
			})
		}
	})
}

// TestLuaMatchesAlgo for calendar limits: days, weeks and months in
// zones with and without clock changes, anchored or not, charging denied
// checks or not, with Go's clock the script's (the harness sends each
// step the windows around its instant).
func TestLuaMatchesAlgoCalendar(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		rapid.Check(t, func(rt *rapid.T) {
			matchAlgo(rt, c, drawCalendarLimit(rt))
		})
	})
}

// matchAlgo runs a drawn sequence of steps under l on the Lua harness
// and through package algo, and fails unless they decide the same and
// keep the same state at every step.
func matchAlgo(rt *rapid.T, c rueidis.Client, l bouncer.Limit) {
	steps := drawSteps(rt, l)
	got := runLua(rt, c, keyOn("fuzz"), l, steps)
	p := algo.Prepare(l)
	var s algo.State
	for i, st := range steps {
		var want storetest.Want
		saved := true
		switch {
		case st.refund:
			s = p.Refund(s, st.at, st.cost)
		case st.charge:
			s = p.Charge(s, st.at, st.cost)
		default:
			var r algo.Result
			before := s
			s, r = p.Check(s, st.at, st.cost)
			want = storetest.Want{Allowed: r.Allowed, Remaining: r.Remaining, ResetAfter: r.ResetAfter, RetryAfter: r.RetryAfter, Delay: r.Delay}
			saved = st.cost > 0 && (r.Allowed || l.ChargeDenied && (s.T != before.T || s.N != before.N))
		}
		if saved && p.Expiry(s) <= st.at {
			// The store forgets a state it saves fresh (a clock that
			// steps back may tell).
			s = algo.State{}
		}
		if got[i].want != want {
			rt.Fatalf("step %d (%+v, %v): Lua decided %v, algo %v", i, st, time.Unix(0, st.at).UTC(), got[i].want, want)
		}
		if g, w := luaState(rt, l, got[i].kept), goState(&p, s, st.at); g != w {
			rt.Fatalf("step %d (%+v, %v): Lua kept %q (stored %q), algo %q", i, st, time.Unix(0, st.at).UTC(), g, got[i].kept, w)
		}
	}
}

// drawCalendarLimit draws a valid calendar limit.
func drawCalendarLimit(t *rapid.T) bouncer.Limit {
	zones := []string{"", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Beirut", "Asia/Tokyo"}
	cal := calendar.Period{
		Unit: rapid.SampledFrom([]calendar.Unit{calendar.Day, calendar.Week, calendar.Month}).Draw(t, "unit"),
		Zone: rapid.SampledFrom(zones).Draw(t, "zone"),
	}
	switch cal.Unit {
	case calendar.Week:
		cal.Anchor = rapid.IntRange(0, 7).Draw(t, "anchor")
	case calendar.Month:
		cal.Anchor = rapid.IntRange(0, 31).Draw(t, "anchor")
	}
	l := bouncer.Limit{Name: "fuzz", Algorithm: bouncer.FixedWindow, Calendar: cal, Period: cal.Longest()}
	l.Rate = logTwo(t, 1, bouncer.MaxRate, "rate")
	l.ChargeDenied = rapid.Bool().Draw(t, "charge_denied")
	if err := l.Validate(); err != nil {
		t.Fatalf("%v: %v", l, err)
	}
	return l
}

// logTwo draws an int64 in [lo, hi] whose magnitude is spread evenly over
// the powers of two, so that small and huge values are drawn alike.
func logTwo(t *rapid.T, lo, hi int64, label string) int64 {
	e := rapid.IntRange(bits.Len64(uint64(lo))-1, bits.Len64(uint64(hi))-1).Draw(t, label+"_bits")
	from := max(lo, int64(1)<<e)
	to := min(hi, int64(1)<<(e+1)-1)
	return rapid.Int64Range(from, max(from, to)).Draw(t, label)
}

// drawLimit draws a valid limit of algorithm a of any magnitude.
func drawLimit(t *rapid.T, a bouncer.Algorithm) bouncer.Limit {
	for {
		l := bouncer.Limit{Name: "fuzz", Algorithm: a}
		l.Period = time.Duration(logTwo(t, 1, int64(bouncer.MaxPeriod), "period"))
		l.Rate = logTwo(t, 1, min(bouncer.MaxRate, int64(l.Period)), "rate")
		switch a {
		case bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket:
			l.Burst = logTwo(t, 1, bouncer.MaxRate, "burst")
			if most := 2 * int64(bouncer.MaxPeriod) / int64(l.Interval()); l.Burst > most {
				l.Burst = max(most, 1)
			}
			l.Shape = a == bouncer.LeakyBucket && rapid.Bool().Draw(t, "shape")
		case bouncer.FixedWindow, bouncer.SlidingWindowCounter:
			l.ChargeDenied = rapid.Bool().Draw(t, "charge_denied")
		}
		if l.Validate() == nil {
			return l
		}
	}
}

// drawSteps draws a sequence of checks, refunds and charges under l.
func drawSteps(t *rapid.T, l bouncer.Limit) []luaStep {
	capacity := l.Capacity()
	now := storetest.Start.UnixNano() + rapid.Int64Range(0, int64(bouncer.MaxPeriod)).Draw(t, "start")
	end := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	n := rapid.IntRange(1, 40).Draw(t, "steps")
	steps := make([]luaStep, n)
	for i := range steps {
		var adv int64
		switch rapid.IntRange(0, 9).Draw(t, "advance_kind") {
		case 0, 1:
			adv = 0
		case 2, 3, 4:
			adv = logTwo(t, 1, max(int64(l.Interval()), 1), "advance") // within a unit's refill
		case 5, 6, 7:
			adv = logTwo(t, 1, 3*int64(l.Period), "advance")
		case 8:
			adv = logTwo(t, 1, 1<<62, "advance") // anything, to far ahead
		case 9:
			adv = -logTwo(t, 1, int64(l.Period), "back") // a clock that stepped back
		}
		now = min(max(now+adv, storetest.Start.UnixNano()), end)
		var cost int64
		switch rapid.IntRange(0, 5).Draw(t, "cost_kind") {
		case 0:
			cost = 0
		case 1, 2:
			cost = 1
		case 3, 4:
			cost = logTwo(t, 1, capacity, "cost")
		case 5:
			cost = logTwo(t, 1, 2*bouncer.MaxRate, "cost") // past the capacity, likely
		}
		kind := rapid.IntRange(0, 11).Draw(t, "refund_or_charge")
		refund, charge := kind < 2, kind == 2 && store.Chargeable(l)
		if (refund || charge) && cost == 0 {
			cost = 1
		}
		steps[i] = luaStep{at: now, cost: cost, refund: refund, charge: charge}
	}
	return steps
}

// goState writes the state algo keeps, as the harness writes Lua's: ""
// when it is fresh at now, a one-word state as the store's word, a log
// as its entries "instant:count", entries of one instant merged.
func goState(p *algo.Params, s algo.State, now int64) string {
	l := p.Limit
	if !isLog(l) {
		if p.Expiry(s) <= now {
			return ""
		}
		if !p.OneWord() {
			return strconv.FormatInt(s.T, 10) + ":" + strconv.FormatInt(s.N, 10)
		}
		return strconv.FormatInt(s.T, 10)
	}
	var es []algo.Entry
	for _, e := range s.Log {
		switch {
		case e.N == 0:
		case len(es) > 0 && es[len(es)-1].At == e.At:
			es[len(es)-1].N += e.N
		default:
			es = append(es, e)
		}
	}
	return entries(es)
}

func entries(es []algo.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%d:%d", e.At, e.N)
	}
	return strings.Join(parts, " ")
}

func isLog(l bouncer.Limit) bool {
	return l.Algorithm == bouncer.SlidingWindowLog || l.Algorithm == bouncer.Concurrency
}

// luaState reads what the harness says Lua kept, in goState's form. A
// log's sorted set must hold its entries in order, each scored by its
// instant in whole milliseconds, and the sentinel "#" scored −(total+1).
func luaState(t *rapid.T, l bouncer.Limit, kept string) string {
	if !isLog(l) || kept == "" {
		return kept
	}
	var es []algo.Entry
	total := int64(-1)
	for _, f := range strings.Fields(kept) {
		member, score, _ := strings.Cut(f, "=")
		sc, err := strconv.ParseFloat(score, 64)
		if err != nil {
			t.Fatalf("member %q: score %q: %v", member, score, err)
		}
		if member == "#" {
			total = int64(-sc) - 1
			continue
		}
		at, count, ok := strings.Cut(member, ":")
		a, err1 := strconv.ParseInt(at, 10, 64)
		n, err2 := strconv.ParseInt(count, 10, 64)
		if !ok || len(at) != 20 || err1 != nil || err2 != nil || n <= 0 {
			t.Fatalf("member %q: want a 20-digit instant and a positive count", member)
		}
		if want := float64(a / 1_000_000); sc != want {
			t.Fatalf("member %q: score %v, want %v (its instant in ms)", member, sc, want)
		}
		es = append(es, algo.Entry{At: a, N: n})
	}
	if !slices.IsSortedFunc(es, func(x, y algo.Entry) int { return cmp.Compare(x.At, y.At) }) {
		t.Fatalf("log %q: entries out of order", kept)
	}
	var sum int64
	for _, e := range es {
		sum += e.N
	}
	if total != sum {
		t.Fatalf("log %q: the sentinel says %d units, the entries hold %d", kept, total, sum)
	}
	return entries(es)
}

// Every file of lua/ stays short enough to read whole.
func TestLuaFilesShort(t *testing.T) {
	files := redisstore.LuaFiles()
	if len(files) < 10 {
		t.Fatalf("lua/ has %d files, want the library's", len(files))
	}
	for name, lines := range files {
		if lines > 400 {
			t.Errorf("lua/%s: %d lines, want at most 400", name, lines)
		}
	}
}

// A library's first call may be a reset, which reads no clock: it still
// finds the standard functions the library keeps as locals (time.lua's
// T.std).
func TestResetFirst(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		l := bouncer.Limit{Name: "first", Algorithm: bouncer.GCRA, Rate: 1, Period: time.Second, Burst: 1}
		if err := redisstore.ResetFirst(context.Background(), c, l, keyOn("reset-first")); err != nil {
			t.Fatalf("a reset as the library's first call: %v", err)
		}
	})
}
