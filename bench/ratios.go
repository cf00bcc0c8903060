//go:build ignore

// Ratios reads the output of go test -bench in this module on standard
// input and writes the tables of docs/benchmarks.md: the results, and
// every bouncer implementation's ratio to every peer, computed rather
// than typed.
//
//	go run ratios.go < out.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark line: its parameters and its metrics by unit.
type result struct {
	bench, impl, keys, mode string
	metrics                 map[string]float64
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
		fmt.Fprintf(w, "Each number is the median of %d runs (-count %d).\n\n", runs, runs)
	}
	check := filter(results, "BenchmarkCheck")
	bytes := filter(results, "BenchmarkBytesPerKey")
	if len(check) > 0 {
		checkTables(w, check)
	}
	if len(bytes) > 0 {
		bytesTables(w, bytes)
	}
	targets(w, check, bytes)
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
	for _, r := range rs {
		id := r.bench + "/" + r.impl + "/" + r.keys + "/" + r.mode
		if groups[id] == nil {
			out = append(out, r)
		}
		groups[id] = append(groups[id], r)
	}
	runs := 0
	for i, r := range out {
		g := groups[r.bench+"/"+r.impl+"/"+r.keys+"/"+r.mode]
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

func caseOf(r result) string { return strings.TrimSpace("keys=" + r.keys + " " + r.mode) }

func find(rs []result, impl, c string) (result, bool) {
	for _, r := range rs {
		if r.impl == impl && caseOf(r) == c {
			return r, true
		}
	}
	return result{}, false
}

func checkTables(w io.Writer, rs []result) {
	bouncers, peers := impls(rs)
	cs := cases(rs)
	all := append(slices.Clone(bouncers), peers...)

	fmt.Fprintf(w, "### Check: ns/op (allocs/op)\n\n| impl |")
	for _, c := range cs {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cs)))
	for _, im := range all {
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

	fmt.Fprintf(w, "\n### Check: throughput ratios (peer ns/op ÷ bouncer ns/op; above 1 means bouncer is faster)\n")
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
// most half the bytes per key of the leanest peer.
func targets(w io.Writer, check, bytes []result) {
	const want = 2.0
	fmt.Fprintf(w, "### Targets (at least %.0f× the fastest peer; at most 1/%.0f of the leanest peer's bytes)\n\n| target | bouncer | best peer | ratio | met |\n|---|---|---|---:|---|\n", want, want)
	bouncers, peers := impls(check)
	for _, c := range []string{"keys=100000 serial", "keys=100000 parallel"} {
		p, pv := fastestPeer(check, peers, c, "ns/op")
		for _, b := range bouncers {
			if r, ok := find(check, b, c); ok && p != "" && targeted(b) {
				row(w, "throughput, "+c, b, p, pv/r.metrics["ns/op"], want)
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
// is one.
func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
