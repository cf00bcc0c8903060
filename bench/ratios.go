//go:build ignore

// Ratios reads the output of go test -bench in this module on standard
// input and writes the tables of docs/benchmarks.md: the results, and
// every bouncer implementation's ratio to every peer, computed rather
// than typed. The Redis benchmarks' results, when there are any, get
// tables of their own after the in-process ones, and so do the RLS
// benchmarks' (BenchmarkRLS: rate-limit servers over gRPC) after those,
// the HTTP middleware benchmarks' (BenchmarkMiddleware and
// BenchmarkMiddlewareLoopback) after those, and the gateway benchmark's
// (BenchmarkGateway) last.
//
//	go run ratios.go < out.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark line: its parameters and its metrics by unit.
// State is set by BenchmarkCheckRandom only; topology and callers by the
// Redis benchmarks only; server, store, descriptors and streams by the RLS
// benchmarks only.
type result struct {
	bench, impl, keys, state, mode      string
	topology, callers                   string
	server, store, descriptors, streams string
	metrics                             map[string]float64
}

// procs is the -GOMAXPROCS suffix go test adds to a benchmark's name.
var procs = regexp.MustCompile(`-\d+$`)

func main() {
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(1)
	}
	results, runs := medians(results)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if runs > 1 {
		fmt.Fprintf(w, "Each number is the median of %d runs.\n\n", runs)
	}
	check := filter(results, "BenchmarkCheck")
	random := filter(results, "BenchmarkCheckRandom")
	floors := inProcessFloors{
		check:  filter(results, "BenchmarkCheckFloor"),
		random: filter(results, "BenchmarkCheckRandomFloor"),
	}
	bytes := filter(results, "BenchmarkBytesPerKey")
	redisCheck := filter(results, "BenchmarkRedisCheck")
	redisBytes := filter(results, "BenchmarkRedisBytesPerKey")
	rls := filter(results, "BenchmarkRLS")
	mw := filter(results, "BenchmarkMiddleware")
	mwLoopback := filter(results, "BenchmarkMiddlewareLoopback")
	gw := filter(results, "BenchmarkGateway")
	if len(check) > 0 {
		checkTables(w, check, "Check")
	}
	if len(random) > 0 {
		checkTables(w, random, "Check at random")
		refilledTable(w, random)
	}
	if len(floors.check)+len(floors.random) > 0 {
		floorTables(w, check, random, floors)
	}
	if len(bytes) > 0 {
		bytesTables(w, bytes)
	}
	// The in-process targets, unless the input holds only Redis, RLS,
	// middleware or gateway results.
	inProcess := len(check)+len(random)+len(bytes) > 0 || len(redisCheck)+len(redisBytes)+len(rls)+len(mw)+len(mwLoopback)+len(gw) == 0
	if inProcess {
		targets(w, check, random, floors, bytes)
	}
	redis := len(redisCheck)+len(redisBytes) > 0
	if redis {
		if inProcess {
			fmt.Fprintln(w)
		}
		if len(redisCheck) > 0 {
			redisCheckTables(w, redisCheck)
		}
		if len(redisBytes) > 0 {
			redisBytesTables(w, redisBytes)
		}
		redisTargets(w, redisCheck, redisBytes)
	}
	if len(rls) > 0 {
		if inProcess || redis {
			fmt.Fprintln(w)
		}
		rlsTables(w, rls)
	}
	if len(mw)+len(mwLoopback) > 0 {
		if inProcess || redis || len(rls) > 0 {
			fmt.Fprintln(w)
		}
		middlewareTables(w, mw, mwLoopback)
	}
	if len(gw) > 0 {
		if inProcess || redis || len(rls)+len(mw)+len(mwLoopback) > 0 {
			fmt.Fprintln(w)
		}
		gatewayTables(w, gw)
	}
}

func parse(r io.Reader) ([]result, error) {
	var rs []result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result: a failure, or a name printed alone
		}
		parts := strings.Split(procs.ReplaceAllString(f[0], ""), "/")
		res := result{bench: parts[0], metrics: map[string]float64{}}
		for _, p := range parts[1:] {
			switch k, v, _ := strings.Cut(p, "="); k {
			case "impl":
				res.impl = v
			case "keys":
				res.keys = v
			case "state":
				res.state = v
			case "topology":
				res.topology = v
			case "callers":
				res.callers = v
			case "server":
				res.server = v
			case "store":
				res.store = v
			case "descriptors":
				res.descriptors = v
			case "streams":
				res.streams = v
			default:
				res.mode = p
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %v", f[0], f[i], err)
			}
			res.metrics[f[i+1]] = v
		}
		rs = append(rs, res)
	}
	return rs, sc.Err()
}

// medians merges the results of one benchmark run several times (go test
// -count) into one whose every metric is the median, and returns the
// most runs any benchmark had.
func medians(rs []result) ([]result, int) {
	var out []result
	groups := map[string][]result{}
	id := func(r result) string {
		return r.bench + "/" + r.impl + "/" + r.keys + "/" + r.state + "/" + r.mode + "/" + r.topology + "/" + r.callers +
			"/" + r.server + "/" + r.store + "/" + r.descriptors + "/" + r.streams
	}
	for _, r := range rs {
		if groups[id(r)] == nil {
			out = append(out, r)
		}
		groups[id(r)] = append(groups[id(r)], r)
	}
	runs := 0
	for i, r := range out {
		g := groups[id(r)]
		runs = max(runs, len(g))
		m := map[string]float64{}
		for unit := range r.metrics {
			var vs []float64
			for _, x := range g {
				vs = append(vs, x.metrics[unit])
			}
			slices.Sort(vs)
			if n := len(vs); n%2 == 1 {
				m[unit] = vs[n/2]
			} else {
				m[unit] = (vs[n/2-1] + vs[n/2]) / 2
			}
		}
		out[i].metrics = m
	}
	return out, runs
}

func filter(rs []result, bench string) []result {
	var out []result
	for _, r := range rs {
		if r.bench == bench {
			out = append(out, r)
		}
	}
	return out
}

func isBouncer(impl string) bool { return strings.HasPrefix(impl, "bouncer-") }

// impls returns the implementations in rs in order of appearance, bouncer's
// first.
func impls(rs []result) (bouncers, peers []string) {
	for _, r := range rs {
		if slices.Contains(bouncers, r.impl) || slices.Contains(peers, r.impl) {
			continue
		}
		if isBouncer(r.impl) {
			bouncers = append(bouncers, r.impl)
		} else {
			peers = append(peers, r.impl)
		}
	}
	return bouncers, peers
}

// cases returns the distinct "keys=N mode" cases in rs in order of
// appearance.
func cases(rs []result) []string {
	var cs []string
	for _, r := range rs {
		if c := caseOf(r); !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return cs
}

func caseOf(r result) string {
	if r.topology != "" {
		return redisCaseOf(r)
	}
	if r.keys == "" && r.callers != "" {
		return "callers=" + r.callers // BenchmarkMiddlewareLoopback
	}
	if r.state != "" {
		return "keys=" + r.keys + " " + r.state + " " + r.mode
	}
	return strings.TrimSpace("keys=" + r.keys + " " + r.mode)
}

func find(rs []result, impl, c string) (result, bool) {
	for _, r := range rs {
		if r.impl == impl && caseOf(r) == c {
			return r, true
		}
	}
	return result{}, false
}

// nsAllocsTable writes the table of ns/op and allocs/op of each of impls
// in each case, titled name.
func nsAllocsTable(w io.Writer, name string, rs []result, impls, cs []string) {
	fmt.Fprintf(w, "### %s: ns/op (allocs/op)\n\n| impl |", name)
	for _, c := range cs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cs)))
	for _, im := range impls {
		fmt.Fprintf(w, "| %s |", im)
		for _, c := range cs {
			if r, ok := find(rs, im, c); ok {
				fmt.Fprintf(w, " %s (%s) |", num(r.metrics["ns/op"]), num(r.metrics["allocs/op"]))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
}

// checkTables writes the ns/op of every implementation in every case of
// rs, a check benchmark called name in the titles, and every bouncer
// implementation's ratio to every peer.
func checkTables(w io.Writer, rs []result, name string) {
	bouncers, peers := impls(rs)
	cs := cases(rs)
	all := append(slices.Clone(bouncers), peers...)

	nsAllocsTable(w, name, rs, all, cs)

	fmt.Fprintf(w, "\n### %s: throughput ratios (peer ns/op ÷ bouncer ns/op; above 1 means bouncer is faster)\n", name)
	for _, c := range cs {
		fmt.Fprintf(w, "\n**%s**\n\n| bouncer |", c)
		for _, p := range peers {
			fmt.Fprintf(w, " %s |", p)
		}
		fmt.Fprintf(w, " fastest peer |\n|---|%s---:|\n", strings.Repeat("---:|", len(peers)))
		ratioRows(w, rs, bouncers, peers, c, "ns/op")
	}
	fmt.Fprintln(w)
}

func bytesTables(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	fmt.Fprintf(w, "### Bytes per key\n\n| impl | keys | B/key | ns/key (insert) | allocs/key |\n|---|---:|---:|---:|---:|\n")
	for _, im := range append(slices.Clone(bouncers), peers...) {
		for _, r := range rs {
			if r.impl != im {
				continue
			}
			keys, _ := strconv.ParseFloat(r.keys, 64)
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", im, r.keys, num(r.metrics["B/key"]), num(r.metrics["ns/key"]), num(r.metrics["allocs/op"]/keys))
		}
	}
	fmt.Fprintf(w, "\n### Bytes per key: ratios (peer B/key ÷ bouncer B/key; above 1 means bouncer is leaner)\n\n| bouncer |")
	for _, p := range peers {
		fmt.Fprintf(w, " %s |", p)
	}
	fmt.Fprintf(w, " leanest peer |\n|---|%s---:|\n", strings.Repeat("---:|", len(peers)))
	for _, c := range cases(rs) {
		ratioRows(w, rs, bouncers, peers, c, "B/key")
	}
	fmt.Fprintln(w)
}

// ratioRows writes, for case c, one table row per bouncer implementation:
// each peer's unit over bouncer's, then the best peer's (the one with the
// least unit) and its name.
func ratioRows(w io.Writer, rs []result, bouncers, peers []string, c, unit string) {
	best, bestValue := fastestPeer(rs, peers, c, unit)
	for _, b := range bouncers {
		br, ok := find(rs, b, c)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s |", b)
		for _, p := range peers {
			if pr, ok := find(rs, p, c); ok {
				fmt.Fprintf(w, " %s |", ratio(pr.metrics[unit], br.metrics[unit]))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintf(w, " %s (%s) |\n", ratio(bestValue, br.metrics[unit]), best)
	}
}

// fastestPeer returns the peer with the least of unit in case c.
func fastestPeer(rs []result, peers []string, c, unit string) (string, float64) {
	best, v := "", 0.0
	for _, p := range peers {
		if r, ok := find(rs, p, c); ok && (best == "" || r.metrics[unit] < v) {
			best, v = p, r.metrics[unit]
		}
	}
	return best, v
}

// targets checks the goals: token_bucket and gcra at 100 000 keys at least
// twice the throughput of the fastest peer, serial and parallel, and at
// most half the bytes per key of the leanest peer; on refilled state at
// 10 000 and 100 000 keys, with the store at its defaults, at least twice
// the fastest peer and no allocation; in parallel at 100 000 keys, at
// most 1.25× the floor.
func targets(w io.Writer, check, random []result, floors inProcessFloors, bytes []result) {
	const want = 2.0
	fmt.Fprintf(w, "### Targets (at least %.0f× the fastest peer; at most 1/%.0f of the leanest peer's bytes; at most %.2f× the floor)\n\n| target | bouncer | best peer | ratio | met |\n|---|---|---|---:|---|\n", want, want, floorWant)
	bouncers, peers := impls(check)
	for _, c := range []string{"keys=100000 serial", "keys=100000 parallel"} {
		p, pv := fastestPeer(check, peers, c, "ns/op")
		for _, b := range bouncers {
			if r, ok := find(check, b, c); ok && p != "" && targeted(b) {
				row(w, "throughput, "+c, b, p, pv/r.metrics["ns/op"], want)
			}
		}
	}
	bouncers, peers = impls(random)
	for _, c := range []string{"keys=10000 refilled serial", "keys=10000 refilled parallel", "keys=100000 refilled serial", "keys=100000 refilled parallel"} {
		p, pv := fastestPeer(random, peers, c, "ns/op")
		for _, b := range bouncers {
			if r, ok := find(random, b, c); ok && p != "" && atDefaults(b) {
				row(w, "throughput at random, "+c, b, p, pv/r.metrics["ns/op"], want)
			}
		}
	}
	for _, c := range []string{"keys=10000 refilled serial", "keys=10000 refilled parallel", "keys=100000 refilled serial", "keys=100000 refilled parallel"} {
		for _, b := range bouncers {
			if r, ok := find(random, b, c); ok && atDefaults(b) {
				a := r.metrics["allocs/op"]
				fmt.Fprintf(w, "| allocs/op at random, %s | %s | – | %s | %s |\n", c, b, num(a), yes(a == 0))
			}
		}
	}
	for _, fc := range floorCases(check, random, floors) {
		if fc.c != "keys=100000 parallel" && fc.c != "keys=100000 refilled parallel" {
			continue
		}
		for _, b := range bouncers {
			if r, ok := find(fc.rs, b, fc.c); ok && atDefaults(b) {
				v := r.metrics["ns/op"] / fc.floor
				fmt.Fprintf(w, "| %s, %s, ÷ floor | %s | – | %.2f× | %s |\n", fc.bench, fc.c, b, v, yes(v <= floorWant))
			}
		}
	}
	bouncers, peers = impls(bytes)
	for _, c := range cases(bytes) {
		p, pv := fastestPeer(bytes, peers, c, "B/key")
		for _, b := range bouncers {
			if r, ok := find(bytes, b, c); ok && p != "" && targeted(b) {
				row(w, "bytes per key, "+c, b, p, pv/r.metrics["B/key"], want)
			}
		}
	}
}

// floorWant is the most a bouncer check may cost over the floor's, in
// parallel at 100 000 keys.
const floorWant = 1.25

// atDefaults reports whether impl is a targeted store at its default
// options.
func atDefaults(impl string) bool {
	return targeted(impl) && !strings.HasSuffix(impl, "-exactclock")
}

// inProcessFloors are BenchmarkCheckFloor's results and
// BenchmarkCheckRandomFloor's.
type inProcessFloors struct{ check, random []result }

// floorCase is one case of a check benchmark, rs, with the floor's ns/op
// on its workload.
type floorCase struct {
	bench, c string
	rs       []result
	floor    float64
}

// floorCases returns the cases of BenchmarkCheck and BenchmarkCheckRandom
// that have a floor: BenchmarkCheckFloor's for the first,
// BenchmarkCheckRandomFloor's (the same for both states) for the second.
func floorCases(check, random []result, floors inProcessFloors) []floorCase {
	var fcs []floorCase
	for _, c := range cases(check) {
		if f, ok := find(floors.check, "", c); ok {
			fcs = append(fcs, floorCase{"BenchmarkCheck", c, check, f.metrics["ns/op"]})
		}
	}
	var seen []string
	for _, r := range random {
		c := caseOf(r)
		if slices.Contains(seen, c) {
			continue
		}
		seen = append(seen, c)
		if f, ok := find(floors.random, "", "keys="+r.keys+" "+r.mode); ok {
			fcs = append(fcs, floorCase{"BenchmarkCheckRandom", c, random, f.metrics["ns/op"]})
		}
	}
	return fcs
}

// refilledTable writes, for BenchmarkCheckRandom, each implementation's
// ns/op on refilled state over its ns/op on live state.
func refilledTable(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	var cs []string
	for _, r := range rs {
		if c := "keys=" + r.keys + " " + r.mode; !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	fmt.Fprintf(w, "### Check at random: refilled ÷ live (ns/op on refilled state over ns/op on live state; 1 means a check of refilled state costs what one of live state does)\n\n| impl |")
	for _, c := range cs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cs)))
	for _, im := range append(slices.Clone(bouncers), peers...) {
		fmt.Fprintf(w, "| %s |", im)
		for _, c := range cs {
			keys, mode, _ := strings.Cut(c, " ")
			refilled, ok1 := find(rs, im, keys+" refilled "+mode)
			live, ok2 := find(rs, im, keys+" live "+mode)
			if ok1 && ok2 {
				fmt.Fprintf(w, " %s |", ratio(refilled.metrics["ns/op"], live.metrics["ns/op"]))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// floorTables writes the floors' ns/op and the ratio of each bouncer
// implementation at its defaults to the floor of its workload.
func floorTables(w io.Writer, check, random []result, floors inProcessFloors) {
	fcs := floorCases(check, random, floors)
	if len(fcs) == 0 {
		return
	}
	fmt.Fprintf(w, "### Floors: bouncer ÷ floor (ns/op over the floor's on the same workload; the floor is not a limiter)\n\n| benchmark | case | floor ns/op |")
	bouncers, _ := impls(append(slices.Clone(check), random...))
	var shown []string
	for _, b := range bouncers {
		if atDefaults(b) {
			shown = append(shown, b)
			fmt.Fprintf(w, " %s |", b)
		}
	}
	fmt.Fprintf(w, "\n|---|---|---:|%s\n", strings.Repeat("---:|", len(shown)))
	for _, fc := range fcs {
		fmt.Fprintf(w, "| %s | %s | %s |", fc.bench, fc.c, num(fc.floor))
		for _, b := range shown {
			if r, ok := find(fc.rs, b, fc.c); ok {
				fmt.Fprintf(w, " %.2f× |", r.metrics["ns/op"]/fc.floor)
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// targeted reports whether the targets concern impl: the token bucket and
// GCRA, in every configuration of the store.
func targeted(impl string) bool {
	return strings.HasPrefix(impl, "bouncer-token_bucket") || strings.HasPrefix(impl, "bouncer-gcra")
}

func row(w io.Writer, target, b, p string, r, want float64) {
	met := "no"
	if r >= want {
		met = "yes"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %.2f× | %s |\n", target, b, p, r, met)
}

func ratio(peer, ours float64) string {
	if ours == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", peer/ours)
}

// num formats v with three significant digits, or as an integer when it
// is one or has more than three digits before the point (the median of
// an even number of runs can end in .5: 21706.5 is 21707, not 2.17e+04).
func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	if math.Abs(v) >= 999.5 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// The Redis benchmarks' metrics (see redis_test.go and
// redis_memory_test.go).
const (
	unitDecisions = "decisions/s"
	unitP50       = "p50-µs"
	unitP99       = "p99-µs"
	unitP999      = "p99.9-µs"
)

// redisTargetPeer is the peer of the Redis throughput target, and
// redisTargetCallers its caller count.
const (
	redisTargetPeer    = "redis_rate"
	redisTargetCallers = "64"
)

// redisCaseOf is a Redis result's case: its topology, its state, then its
// callers or its keys.
func redisCaseOf(r result) string {
	c := r.topology
	if r.state != "" {
		c += ", state=" + r.state
	}
	if r.callers != "" {
		c += ", callers=" + r.callers
	}
	if r.keys != "" {
		c += ", keys=" + r.keys
	}
	return c
}

func redisCheckTables(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	all := append(slices.Clone(bouncers), peers...)
	metricTable(w, rs, all, "### Redis check: decisions/s and latency (µs)",
		[]string{"decisions/s", "p50", "p99", "p99.9", "allocs/op"},
		[]string{unitDecisions, unitP50, unitP99, unitP999, "allocs/op"})

	ratioHeader(w, "\n### Redis check: ratios (decisions/s: bouncer's ÷ peer's; p99: peer's ÷ bouncer's; above 1 means bouncer is better)",
		[]string{"case", "bouncer", "metric"}, peers, "best peer")
	for _, c := range cases(rs) {
		for _, b := range bouncers {
			br, ok := find(rs, b, c)
			if !ok {
				continue
			}
			for _, unit := range []string{unitDecisions, unitP99} {
				higher := unit == unitDecisions
				fmt.Fprintf(w, "| %s | %s | %s |", c, b, strings.TrimSuffix(unit, "-µs"))
				ratioCells(w, rs, peers, c, br, unit, higher)
			}
		}
	}
	fmt.Fprintln(w)
}

func redisBytesTables(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	all := append(slices.Clone(bouncers), peers...)
	metricTable(w, rs, all, "### Redis bytes per key",
		[]string{"B/key", "Redis keys", "ns/key (insert)"},
		[]string{"B/key", "redis-keys", "ns/key"})
	ratioHeader(w, "\n### Redis bytes per key: ratios (peer B/key ÷ bouncer B/key; above 1 means bouncer is leaner)",
		[]string{"case", "bouncer"}, peers, "leanest peer")
	for _, c := range cases(rs) {
		for _, b := range bouncers {
			br, ok := find(rs, b, c)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| %s | %s |", c, b)
			ratioCells(w, rs, peers, c, br, "B/key", false)
		}
	}
	fmt.Fprintln(w)
}

// metricTable writes, under title, one row per case and implementation
// of ims with the given metrics, headed by heads.
func metricTable(w io.Writer, rs []result, ims []string, title string, heads, metrics []string) {
	fmt.Fprintf(w, "%s\n\n| case | impl |", title)
	for _, h := range heads {
		fmt.Fprintf(w, " %s |", h)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---:|", len(heads)))
	for _, c := range cases(rs) {
		for _, im := range ims {
			if r, ok := find(rs, im, c); ok {
				fmt.Fprintf(w, "| %s | %s |", c, im)
				for _, m := range metrics {
					fmt.Fprintf(w, " %s |", num(r.metrics[m]))
				}
				fmt.Fprintln(w)
			}
		}
	}
}

// ratioHeader writes a ratio table's title and header: the leading
// columns, one column per peer, and last.
func ratioHeader(w io.Writer, title string, lead, peers []string, last string) {
	fmt.Fprintf(w, "%s\n\n|", title)
	for _, c := range lead {
		fmt.Fprintf(w, " %s |", c)
	}
	for _, p := range peers {
		fmt.Fprintf(w, " %s |", p)
	}
	fmt.Fprintf(w, " %s |\n|%s%s---:|\n", last, strings.Repeat("---|", len(lead)), strings.Repeat("---:|", len(peers)))
}

// ratioCells writes the rest of a ratio row for case c: how many times
// better bouncer's result br is in unit than each peer's, then than the
// best peer's.
func ratioCells(w io.Writer, rs []result, peers []string, c string, br result, unit string, higher bool) {
	for _, p := range peers {
		if pr, ok := find(rs, p, c); ok {
			fmt.Fprintf(w, " %s |", better(br.metrics[unit], pr.metrics[unit], higher))
		} else {
			fmt.Fprintf(w, " – |")
		}
	}
	best, bv := bestPeer(rs, peers, c, unit, higher)
	fmt.Fprintf(w, " %s (%s) |\n", better(br.metrics[unit], bv, higher), best)
}

// better returns how many times better ours is than peer's: ours ÷ peer's
// when higher is better, peer's ÷ ours when lower is.
func better(ours, peer float64, higher bool) string {
	if higher {
		return ratio(ours, peer)
	}
	return ratio(peer, ours)
}

// bestPeer returns the peer with the most (higher) or the least of unit
// in case c.
func bestPeer(rs []result, peers []string, c, unit string, higher bool) (string, float64) {
	best, v := "", 0.0
	for _, p := range peers {
		r, ok := find(rs, p, c)
		if !ok {
			continue
		}
		if x := r.metrics[unit]; best == "" || higher && x > v || !higher && x < v {
			best, v = p, x
		}
	}
	return best, v
}

// redisTargets checks the Redis goals, on every topology: at 64 callers
// at least 3× redis_rate's decisions/s with a lower p99; with one caller
// at least the fastest peer's decisions/s with a p99 no higher than its;
// and at most half the Redis bytes per key of the leanest peer.
func redisTargets(w io.Writer, check, bytes []result) {
	fmt.Fprintf(w, "### Redis targets\n\n| target | case | bouncer | peer | ratio | met |\n|---|---|---|---|---:|---|\n")
	bouncers, checkPeers := impls(check)
	for _, c := range cases(check) {
		p, ok := find(check, redisTargetPeer, c)
		if !ok || !strings.HasSuffix(c, ", callers="+redisTargetCallers) {
			continue
		}
		for _, b := range bouncers {
			r, ok := find(check, b, c)
			if !ok {
				continue
			}
			bd, pd := r.metrics[unitDecisions], p.metrics[unitDecisions]
			bp, pp := r.metrics[unitP99], p.metrics[unitP99]
			met := "no"
			if pd > 0 && bd/pd >= 3 && bp < pp {
				met = "yes"
			}
			fmt.Fprintf(w, "| decisions/s at %s callers ≥ 3× %s, with a lower p99 | %s | %s | %s | %s (p99 %s vs %s µs) | %s |\n",
				redisTargetCallers, redisTargetPeer, c, b, redisTargetPeer, better(bd, pd, true), num(bp), num(pp), met)
		}
	}
	for _, c := range cases(check) {
		if !strings.HasSuffix(c, ", callers=1") {
			continue
		}
		p, pd := bestPeer(check, checkPeers, c, unitDecisions, true)
		pr, ok := find(check, p, c)
		if p == "" || !ok {
			continue
		}
		for _, b := range bouncers {
			r, ok := find(check, b, c)
			if !ok {
				continue
			}
			bd, bp, pp := r.metrics[unitDecisions], r.metrics[unitP99], pr.metrics[unitP99]
			met := "no"
			if bd >= pd && bp <= pp {
				met = "yes"
			}
			fmt.Fprintf(w, "| decisions/s with 1 caller ≥ the fastest peer's, p99 ≤ its p99 | %s | %s | %s | %s (p99 %s vs %s µs) | %s |\n",
				c, b, p, better(bd, pd, true), num(bp), num(pp), met)
		}
	}
	bouncers, peers := impls(bytes)
	for _, c := range cases(bytes) {
		p, pv := bestPeer(bytes, peers, c, "B/key", false)
		for _, b := range bouncers {
			r, ok := find(bytes, b, c)
			if !ok || p == "" {
				continue
			}
			met := "no"
			if pv/r.metrics["B/key"] >= 2 {
				met = "yes"
			}
			fmt.Fprintf(w, "| Redis bytes per key ≤ 1/2 of the leanest peer | %s | %s | %s | %s (%s vs %s B/key) | %s |\n",
				c, b, p, ratio(pv, r.metrics["B/key"]), num(r.metrics["B/key"]), num(pv), met)
		}
	}
}

// The RLS benchmarks' throughput metric (see rls_test.go); their latencies
// are unitP50, unitP99 and unitP999.
const unitChecks = "checks/s"

// rlsBouncer is Bouncer's server in the RLS benchmarks.
const rlsBouncer = "bouncer"

// rlsPair is a comparison of the RLS benchmarks: Bouncer's server on
// store beside peer's on the same store, named label in the tables.
type rlsPair struct {
	store, peer, label string
	// lowerP99 is whether the target also asks for a lower p99.
	lowerP99 bool
}

var rlsPairs = []rlsPair{
	{store: "memory", peer: "gubernator", label: "gubernator"},
	{store: "redis", peer: "envoy-ratelimit", label: "envoyproxy/ratelimit", lowerP99: true},
}

// The RLS targets: at rlsTargetStreams streams, at least rlsTargetRatio×
// each pair's peer's checks/s (with a lower p99 where the pair says so).
const (
	rlsTargetStreams = "64"
	rlsTargetRatio   = 2.0
)

// rlsCaseOf is an RLS result's case: its descriptors per request and its
// streams.
func rlsCaseOf(r result) string {
	return "descriptors=" + r.descriptors + ", streams=" + r.streams
}

// rlsCases returns the distinct RLS cases in rs in order of appearance.
func rlsCases(rs []result) []string {
	var cs []string
	for _, r := range rs {
		if c := rlsCaseOf(r); !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return cs
}

func rlsFind(rs []result, server, store, c string) (result, bool) {
	for _, r := range rs {
		if r.server == server && r.store == store && rlsCaseOf(r) == c {
			return r, true
		}
	}
	return result{}, false
}

// rlsPairsIn returns the pairs of which rs holds both sides in some case.
func rlsPairsIn(rs []result) []rlsPair {
	var ps []rlsPair
	for _, p := range rlsPairs {
		for _, c := range rlsCases(rs) {
			_, ok1 := rlsFind(rs, rlsBouncer, p.store, c)
			_, ok2 := rlsFind(rs, p.peer, p.store, c)
			if ok1 && ok2 {
				ps = append(ps, p)
				break
			}
		}
	}
	return ps
}

func rlsTables(w io.Writer, rs []result) {
	// Results: Bouncer's servers first, then the peers', each in order of
	// appearance.
	fmt.Fprintf(w, "### RLS check: checks/s and latency (µs)\n\n| server | store | descriptors | streams | checks/s | p50 | p99 | p99.9 |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, bouncer := range []bool{true, false} {
		for _, r := range rs {
			if (r.server == rlsBouncer) != bouncer {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |", r.server, r.store, r.descriptors, r.streams)
			for _, m := range []string{unitChecks, unitP50, unitP99, unitP999} {
				fmt.Fprintf(w, " %s |", num(r.metrics[m]))
			}
			fmt.Fprintln(w)
		}
	}

	pairs := rlsPairsIn(rs)
	if len(pairs) > 0 {
		var cols []string
		for _, p := range pairs {
			cols = append(cols,
				"bouncer ("+p.store+") / "+p.label,
				"p99 (µs): bouncer vs "+p.label,
				"bouncer's p99 lower")
		}
		ratioHeader(w, "\n### RLS check: ratios (checks/s: bouncer's ÷ the peer's on the same store; above 1 means bouncer is faster)",
			[]string{"case"}, cols[:len(cols)-1], cols[len(cols)-1])
		for _, c := range rlsCases(rs) {
			fmt.Fprintf(w, "| %s |", c)
			for _, p := range pairs {
				br, ok1 := rlsFind(rs, rlsBouncer, p.store, c)
				pr, ok2 := rlsFind(rs, p.peer, p.store, c)
				if !ok1 || !ok2 {
					fmt.Fprintf(w, " – | – | – |")
					continue
				}
				bp, pp := br.metrics[unitP99], pr.metrics[unitP99]
				fmt.Fprintf(w, " %s | %s vs %s | %s |", better(br.metrics[unitChecks], pr.metrics[unitChecks], true), num(bp), num(pp), yes(bp < pp))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
	rlsTargets(w, rs)
}

// rlsTargets checks the RLS goals, for every descriptor count: at 64
// streams at least 2× envoyproxy/ratelimit's checks/s with a lower p99
// (both on Redis), and at least 2× gubernator's (both in memory).
func rlsTargets(w io.Writer, rs []result) {
	fmt.Fprintf(w, "### RLS targets\n\n| target | case | bouncer | peer | ratio | met |\n|---|---|---|---|---:|---|\n")
	for _, p := range rlsPairsIn(rs) {
		target := fmt.Sprintf("checks/s at %s streams ≥ %.0f× %s", rlsTargetStreams, rlsTargetRatio, p.label)
		if p.lowerP99 {
			target += ", with a lower p99"
		}
		for _, c := range rlsCases(rs) {
			if !strings.HasSuffix(c, ", streams="+rlsTargetStreams) {
				continue
			}
			br, ok1 := rlsFind(rs, rlsBouncer, p.store, c)
			pr, ok2 := rlsFind(rs, p.peer, p.store, c)
			if !ok1 || !ok2 {
				continue
			}
			bc, pc := br.metrics[unitChecks], pr.metrics[unitChecks]
			bp, pp := br.metrics[unitP99], pr.metrics[unitP99]
			met := pc > 0 && bc/pc >= rlsTargetRatio && (!p.lowerP99 || bp < pp)
			fmt.Fprintf(w, "| %s | %s | bouncer (%s) | %s (%s) | %s (%s vs %s checks/s; p99 %s vs %s µs) | %s |\n",
				target, c, p.store, p.label, p.store, better(bc, pc, true), num(bc), num(pc), num(bp), num(pp), yes(met))
		}
	}
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// mwBare is the HTTP middleware benchmarks' baseline, the handler alone.
const mwBare = "bare"

// The HTTP middleware targets: what bouncer's middleware adds to an
// allowed request over the bare handler is under mwMaxOverhead ns, at
// most 1/mwPeerRatio of the least a peer adds, and no allocation.
const (
	mwMaxOverhead = 1000.0
	mwPeerRatio   = 2.0
)

// middlewareTables writes BenchmarkMiddleware's ns/op, each
// implementation's overhead over bare, the ratios of the peers' overheads
// to bouncer's and the targets, then BenchmarkMiddlewareLoopback's
// latencies and what each middleware adds to bare's.
func middlewareTables(w io.Writer, rs, loopback []result) {
	if len(rs) > 0 {
		mwInProcessTables(w, rs)
	}
	if len(loopback) > 0 {
		mwLoopbackTable(w, loopback)
	}
}

// mwPeers returns the middleware implementations in rs, bouncer's first,
// without bare.
func mwPeers(rs []result) (bouncers, peers []string) {
	bouncers, peers = impls(rs)
	return bouncers, slices.DeleteFunc(peers, func(p string) bool { return p == mwBare })
}

// mwOverhead returns what impl adds to bare in case c, in unit.
func mwOverhead(rs []result, impl, c, unit string) (float64, bool) {
	r, ok1 := find(rs, impl, c)
	bare, ok2 := find(rs, mwBare, c)
	return r.metrics[unit] - bare.metrics[unit], ok1 && ok2
}

func mwInProcessTables(w io.Writer, rs []result) {
	bouncers, peers := mwPeers(rs)
	cs := cases(rs)
	all := append(append([]string{mwBare}, bouncers...), peers...)

	nsAllocsTable(w, "HTTP middleware", rs, all, cs)

	fmt.Fprintf(w, "\n### HTTP middleware: overhead over bare (ns/op − bare's ns/op; allocs/op − bare's, in parentheses)\n\n| impl |")
	for _, c := range cs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cs)))
	for _, im := range append(slices.Clone(bouncers), peers...) {
		fmt.Fprintf(w, "| %s |", im)
		for _, c := range cs {
			ns, ok := mwOverhead(rs, im, c, "ns/op")
			allocs, _ := mwOverhead(rs, im, c, "allocs/op")
			if ok {
				fmt.Fprintf(w, " %s (%s) |", num(ns), num(allocs))
			} else {
				fmt.Fprintf(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}

	ratioHeader(w, "\n### HTTP middleware: overhead ratios (peer's overhead ÷ bouncer's; above 1 means bouncer adds less)",
		[]string{"case", "bouncer"}, peers, "least-overhead peer")
	for _, c := range cs {
		for _, b := range bouncers {
			bo, ok := mwOverhead(rs, b, c, "ns/op")
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| %s | %s |", c, b)
			for _, p := range peers {
				if po, ok := mwOverhead(rs, p, c, "ns/op"); ok {
					fmt.Fprintf(w, " %s |", ratio(po, bo))
				} else {
					fmt.Fprintf(w, " – |")
				}
			}
			best, bv := mwLeastOverhead(rs, peers, c)
			fmt.Fprintf(w, " %s (%s) |\n", ratio(bv, bo), best)
		}
	}

	fmt.Fprintf(w, "\n### HTTP middleware targets (overhead under %.0f ns; at most 1/%.0f of the least-overhead peer's; no allocation over bare)\n\n| target | case | bouncer | figure | met |\n|---|---|---|---|---|\n",
		mwMaxOverhead, mwPeerRatio)
	for _, c := range cs {
		for _, b := range bouncers {
			bo, ok := mwOverhead(rs, b, c, "ns/op")
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| overhead < %.0f ns | %s | %s | %s ns | %s |\n", mwMaxOverhead, c, b, num(bo), yes(bo < mwMaxOverhead))
			if best, bv := mwLeastOverhead(rs, peers, c); best != "" {
				fmt.Fprintf(w, "| overhead ≤ 1/%.0f of the least-overhead peer's | %s | %s | %s %s (%s vs %s ns) | %s |\n",
					mwPeerRatio, c, b, ratio(bv, bo), best, num(bo), num(bv), yes(bo > 0 && bv/bo >= mwPeerRatio || bo <= 0 && bv > 0))
			}
			a, _ := mwOverhead(rs, b, c, "allocs/op")
			fmt.Fprintf(w, "| allocs/op over bare = 0 | %s | %s | %s | %s |\n", c, b, num(a), yes(a == 0))
		}
	}
	fmt.Fprintln(w)
}

// mwLeastOverhead returns the peer that adds the least ns/op to bare in
// case c, and what it adds.
func mwLeastOverhead(rs []result, peers []string, c string) (string, float64) {
	best, v := "", 0.0
	for _, p := range peers {
		if o, ok := mwOverhead(rs, p, c, "ns/op"); ok && (best == "" || o < v) {
			best, v = p, o
		}
	}
	return best, v
}

func mwLoopbackTable(w io.Writer, rs []result) {
	bouncers, peers := mwPeers(rs)
	all := append(append([]string{mwBare}, bouncers...), peers...)
	fmt.Fprintf(w, "### HTTP middleware over loopback: latency (µs) and what each middleware adds to bare's\n\n| case | impl | p50 | p99 | p50 added | p99 added | ns/op |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, c := range cases(rs) {
		for _, im := range all {
			r, ok := find(rs, im, c)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |", c, im, num(r.metrics[unitP50]), num(r.metrics[unitP99]))
			for _, unit := range []string{unitP50, unitP99} {
				if d, ok := mwOverhead(rs, im, c, unit); ok && im != mwBare {
					fmt.Fprintf(w, " %s |", num(d))
				} else {
					fmt.Fprintf(w, " – |")
				}
			}
			fmt.Fprintf(w, " %s |\n", num(r.metrics["ns/op"]))
		}
	}
	fmt.Fprintln(w)
}

// The gateway benchmark's baseline (a bare httputil.ReverseProxy) and its
// metrics of throughput, connections and CPU; its latencies are unitP50
// and unitP99.
const (
	gwBare        = "bare-reverseproxy"
	unitRequests  = "requests/s"
	unitUpstreams = "upstream-conns/op"
	unitCPU       = "cpu-µs/op"
)

// The gateway benchmark's rows the targets name. gwRoundTrip is not a
// proxy: its row is one caller's Redis round trips (p50 and p99 only).
const (
	gwMemory    = "bouncer-gateway-memory"
	gwRedis     = "bouncer-gateway-redis"
	gwCaddy     = "caddy-reverseproxy"
	gwRoundTrip = "redis-roundtrip"
	gwFloor     = "gateway-memory-plus-roundtrip"
)

// The gateway targets. At gwTargetCallers callers, the gateway on the
// memory store makes at least Caddy's requests/s with a p99 no higher
// than Caddy's, and at least gwMinThroughput of bare's requests/s. At
// one caller, what the gateway on Redis adds to bare's p50 is at most
// gwMaxRoundTrips Redis round trips (their p50) more than what the
// gateway on the memory store adds: the store's call to Redis and little
// else. On Redis it adds less than gwMaxP99Added µs to bare's p99, at
// every number of callers.
const (
	gwTargetCallers = "64"
	gwMinThroughput = 0.8
	gwMaxRoundTrips = 1.5
	gwMaxP99Added   = 1000.0
)

// gwAdded returns what impl's result r adds to bare's in case c, in
// unit.
func gwAdded(rs []result, r result, c, unit string) (float64, bool) {
	bare, ok := find(rs, gwBare, c)
	return r.metrics[unit] - bare.metrics[unit], ok
}

// gatewayTables writes BenchmarkGateway's results, each proxy's
// throughput over bare's and the latency it adds to bare's, the Redis
// round trip, the gateways beside the other proxies, then the targets.
func gatewayTables(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	peers = slices.DeleteFunc(peers, func(p string) bool { return p == gwBare || p == gwRoundTrip || p == gwFloor })
	all := append(append([]string{gwBare}, bouncers...), peers...)
	if len(filterImpl(rs, gwFloor)) > 0 {
		all = append(all, gwFloor)
	}
	fmt.Fprintf(w, "### Gateway: requests/s, latency (µs) and CPU, beside the bare ReverseProxy\n\n"+
		"| case | impl | requests/s | ÷ bare's | p50 | p99 | p50 added | p99 added | cpu µs/op | upstream conns/op | allocs/op |\n"+
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cases(rs) {
		bare, hasBare := find(rs, gwBare, c)
		for _, im := range all {
			r, ok := find(rs, im, c)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s |", c, im, num(r.metrics[unitRequests]))
			if hasBare && im != gwBare {
				fmt.Fprintf(w, " %s |", ratio(r.metrics[unitRequests], bare.metrics[unitRequests]))
			} else {
				fmt.Fprintf(w, " – |")
			}
			fmt.Fprintf(w, " %s | %s |", num(r.metrics[unitP50]), num(r.metrics[unitP99]))
			for _, unit := range []string{unitP50, unitP99} {
				if d, ok := gwAdded(rs, r, c, unit); ok && im != gwBare {
					fmt.Fprintf(w, " %s |", num(d))
				} else {
					fmt.Fprintf(w, " – |")
				}
			}
			fmt.Fprintf(w, " %s | %s | %s |\n", num(r.metrics[unitCPU]), num(r.metrics[unitUpstreams]), num(r.metrics["allocs/op"]))
		}
	}

	if rt := filterImpl(rs, gwRoundTrip); len(rt) > 0 {
		fmt.Fprintf(w, "\n")
		metricTable(w, rt, []string{gwRoundTrip}, "### Gateway: one Redis round trip (µs), one caller, as the Redis store makes it",
			[]string{"p50", "p99"}, []string{unitP50, unitP99})
	}

	if len(bouncers) > 0 && len(peers) > 0 {
		fmt.Fprintf(w, "\n### Gateway beside the other proxies (how many times better the gateway's figure is: its requests/s ÷ the peer's, the peer's p99 and CPU ÷ its; above 1 favours the gateway)\n\n"+
			"| case | bouncer | peer | requests/s | p99 | cpu µs/op |\n|---|---|---|---:|---:|---:|\n")
		for _, c := range cases(rs) {
			for _, b := range bouncers {
				br, ok := find(rs, b, c)
				if !ok {
					continue
				}
				for _, p := range peers {
					pr, ok := find(rs, p, c)
					if !ok {
						continue
					}
					fmt.Fprintf(w, "| %s | %s | %s |", c, b, p)
					for _, m := range []struct {
						unit   string
						higher bool
					}{{unitRequests, true}, {unitP99, false}, {unitCPU, false}} {
						fmt.Fprintf(w, " %s (%s vs %s) |", better(br.metrics[m.unit], pr.metrics[m.unit], m.higher), num(br.metrics[m.unit]), num(pr.metrics[m.unit]))
					}
					fmt.Fprintln(w)
				}
			}
		}
	}

	fmt.Fprintf(w, "\n### Gateway targets\n\n| target | case | bouncer | figure | met |\n|---|---|---|---|---|\n")
	for _, c := range cases(rs) {
		bare, hasBare := find(rs, gwBare, c)
		mem, hasMem := find(rs, gwMemory, c)
		red, hasRed := find(rs, gwRedis, c)
		if caddy, ok := find(rs, gwCaddy, c); ok && hasMem && c == "callers="+gwTargetCallers {
			m, p := mem.metrics[unitRequests], caddy.metrics[unitRequests]
			fmt.Fprintf(w, "| requests/s ≥ %s's | %s | %s | %s (%s vs %s) | %s |\n",
				gwCaddy, c, gwMemory, ratio(m, p), num(m), num(p), yes(m >= p))
			m, p = mem.metrics[unitP99], caddy.metrics[unitP99]
			fmt.Fprintf(w, "| p99 ≤ %s's | %s | %s | %s vs %s µs | %s |\n",
				gwCaddy, c, gwMemory, num(m), num(p), yes(m <= p))
		}
		if hasBare && hasMem && c == "callers="+gwTargetCallers {
			v := mem.metrics[unitRequests] / bare.metrics[unitRequests]
			fmt.Fprintf(w, "| requests/s ≥ %.0f %% of bare's | %s | %s | %.0f %% (%s vs %s) | %s |\n",
				gwMinThroughput*100, c, gwMemory, v*100, num(mem.metrics[unitRequests]), num(bare.metrics[unitRequests]), yes(v >= gwMinThroughput))
		}
		if rt, ok := find(rs, gwRoundTrip, c); ok && hasBare && hasMem && hasRed && c == "callers=1" {
			rd, _ := gwAdded(rs, red, c, unitP50)
			md, _ := gwAdded(rs, mem, c, unitP50)
			limit := gwMaxRoundTrips*rt.metrics[unitP50] + md
			fmt.Fprintf(w, "| p50 added ≤ %g × Redis round trip's p50 + %s's p50 added | %s | %s | %s µs vs %g × %s + %s = %s µs | %s |\n",
				gwMaxRoundTrips, gwMemory, c, gwRedis, num(rd), gwMaxRoundTrips, num(rt.metrics[unitP50]), num(md), num(limit), yes(rd <= limit))
		}
		if fl, ok := find(rs, gwFloor, c); ok && hasMem && hasRed && c == "callers=1" {
			// The same target with the round trip as the gateway pays
			// it, in the middle of a request: the floor's p50 less the
			// memory store's.
			rt := fl.metrics[unitP50] - mem.metrics[unitP50]
			rd := red.metrics[unitP50] - mem.metrics[unitP50]
			fmt.Fprintf(w, "| p50 added ≤ %g × a round trip as the gateway pays it (%s − %s) + %s's p50 added | %s | %s | %s µs over %s vs %g × %s = %s µs | %s |\n",
				gwMaxRoundTrips, gwFloor, gwMemory, gwMemory, c, gwRedis, num(rd), gwMemory, gwMaxRoundTrips, num(rt), num(gwMaxRoundTrips*rt), yes(rd <= gwMaxRoundTrips*rt))
		}
		if hasBare && hasRed {
			d, _ := gwAdded(rs, red, c, unitP99)
			fmt.Fprintf(w, "| p99 added < %.0f µs | %s | %s | %s µs (%s vs %s) | %s |\n",
				gwMaxP99Added, c, gwRedis, num(d), num(red.metrics[unitP99]), num(bare.metrics[unitP99]), yes(d < gwMaxP99Added))
		}
	}
	fmt.Fprintln(w)
}

// filterImpl returns the results of impl in rs.
func filterImpl(rs []result, impl string) []result {
	var out []result
	for _, r := range rs {
		if r.impl == impl {
			out = append(out, r)
		}
	}
	return out
}
