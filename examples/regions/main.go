// Regions shows three regions sharing one limit, each region counting in
// a Redis of its own: two instances a region, in async mode, decide
// every check on the instance and divide the limit among the regions by
// demand, in the background. One machine stands for the three regions
// here: one Redis, with a key prefix a region, as if each were its own.
//
//	bash scripts/redis-up.sh --standalone   # one Redis, on 127.0.0.1:16379
//	go run ./examples/regions 127.0.0.1:16379
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/store"
)

func main() {
	addr := "127.0.0.1:16379"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if err := run(os.Stdout, addr, fmt.Sprintf("example-%d", time.Now().UnixNano())); err != nil {
		fmt.Fprintln(os.Stderr, "regions:", err)
		os.Exit(1)
	}
}

var regions = []string{"ap", "eu", "us"}

// global is the limit the regions share: with regions, every limit is
// one limit for all of them, whatever its algorithm and mode, but
// concurrency limits and shaping leaky buckets (docs/regions.md).
var global = bouncer.Limit{Name: "global", Algorithm: bouncer.FixedWindow, Rate: 300, Period: time.Second, Mode: bouncer.Async}

// seconds is how the demand is spread over the regions, second by
// second: evenly, then moving from region to region.
var seconds = []struct {
	demand  string
	weights [3]float64
}{
	{"even", [3]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
	{"even", [3]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
	{"mostly ap", [3]float64{0.8, 0.1, 0.1}},
	{"mostly eu", [3]float64{0.1, 0.8, 0.1}},
	{"mostly us", [3]float64{0.1, 0.1, 0.8}},
}

// load is how many checks a second the regions get in all: three times
// the limit.
const load = 3 * 300

// run writes what the regions admitted, second by second, to w; prefix
// keeps this run's keys apart.
func run(w io.Writer, addr, prefix string) error {
	ins, stop, err := start(addr, prefix)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(w, "one limit of %d a second, shared by three regions (%s) of two instances each,\n", global.Rate, strings.Join(regions, ", "))
	fmt.Fprintf(w, "each counting in its own Redis; offered %d checks a second (three times the limit)\n\n", load)
	fmt.Fprintf(w, "%-6s  %-9s  %4s  %4s  %4s  %4s  %-9s  %s\n", "second", "demand", "ap", "eu", "us", "all", "all/limit", "what ap's first instance knew at its end")
	res := offer(ins)
	within := true
	for s, got := range res.admitted {
		all := got[0] + got[1] + got[2]
		ratio := float64(all) / float64(global.Rate)
		if s > 0 && ratio > 1.1 {
			within = false
		}
		fmt.Fprintf(w, "%6d  %-9s  %4d  %4d  %4d  %4d  %9.2f  %s\n", s+1, seconds[s].demand, got[0], got[1], got[2], all, ratio, view(res.views[s]))
	}
	fmt.Fprintf(w, "\nevery second after the first within 1.1 × the limit: %v\n", within)
	fmt.Fprintf(w, "degraded decisions: %d\n", res.degraded)
	return nil
}

// start makes the six instances, two a region in the order of regions,
// and returns them with a function that closes them and their stores.
// Each has a store of its own for its region and one for each other
// region (its peers), as six servers in three regions would; each
// region's keys are under a prefix of their own.
func start(addr, prefix string) ([]*hybrid.Limiter, func(), error) {
	var stores []*redisstore.Store
	var ins []*hybrid.Limiter
	stop := func() {
		for _, h := range ins {
			h.Close()
		}
		for _, s := range stores {
			s.Close()
		}
	}
	open := func(region string) (*redisstore.Store, error) {
		s, err := redisstore.New(redisstore.Options{URL: "redis://" + addr, Prefix: prefix + "-" + region})
		if err == nil {
			stores = append(stores, s)
		}
		return s, err
	}
	for _, region := range regions {
		for range 2 {
			own, err := open(region)
			if err != nil {
				stop()
				return nil, nil, err
			}
			peers := map[string]store.Sharer{}
			for _, other := range regions {
				if other == region {
					continue
				}
				if peers[other], err = open(other); err != nil {
					stop()
					return nil, nil, err
				}
			}
			ins = append(ins, hybrid.New(own, nil, hybrid.Options{Region: region, Peers: peers}))
		}
	}
	return ins, stop, nil
}

// result is what the regions admitted in each second, by region, and
// what ap's first instance knew of the regions at the end of each.
type result struct {
	admitted [][3]int
	views    [][]hybrid.RegionStats
	degraded int
}

// offer runs the load from the start of the next second for as many
// seconds as there are in seconds: every 10 ms, a hundredth of a
// second's load, each check to a region drawn by the second's weights and to one of
// its two instances.
func offer(ins []*hybrid.Limiter) result {
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: "everyone", Limits: []bouncer.Limit{global}}}, Cost: 1}
	res := result{admitted: make([][3]int, len(seconds)), views: make([][]hybrid.RegionStats, len(seconds))}
	rng := rand.New(rand.NewPCG(1, 2))
	const tick = 10 * time.Millisecond
	start := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(start))
	t := time.NewTicker(tick)
	defer t.Stop()
	for now := start; ; now = <-t.C {
		s := int(now.Sub(start) / time.Second)
		if s >= len(seconds) {
			return res
		}
		for range load * tick / time.Second {
			r := pick(rng, seconds[s].weights)
			d, err := ins[2*r+rng.IntN(2)].Check(context.Background(), req)
			if err == nil && d.Allowed {
				res.admitted[s][r]++
			}
			if d.Degraded {
				res.degraded++
			}
		}
		res.views[s] = ins[0].Regions()
	}
}

// pick draws a region by its weight.
func pick(rng *rand.Rand, weights [3]float64) int {
	x := rng.Float64()
	for r, wt := range weights {
		if x < wt {
			return r
		}
		x -= wt
	}
	return len(weights) - 1
}

// view describes what an instance knew of the regions: each region's
// count in the window and how old the news from it was.
func view(rs []hybrid.RegionStats) string {
	var parts []string
	for _, r := range rs {
		switch {
		case r.Age == 0:
			parts = append(parts, fmt.Sprintf("%s %d", r.Region, r.Used))
		case r.Age < 0:
			parts = append(parts, fmt.Sprintf("%s not heard", r.Region))
		default:
			parts = append(parts, fmt.Sprintf("%s %d (%dms old)", r.Region, r.Used, r.Age.Milliseconds()))
		}
	}
	return strings.Join(parts, ", ")
}
