package simulate

import (
	"encoding/csv"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSimulateFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("# ok\n100ms\n\nlater\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := []string{"--algorithm", "token_bucket", "--rate", "5"}
	steady := []string{"--rps", "10"}
	with := func(base []string, more ...string) []string { return append(slices.Clone(base), more...) }
	tests := []struct {
		name string
		args []string
		want string // a substring of stderr: the flag at fault
	}{
		{"no algorithm", []string{"--rate", "5", "--rps", "1"}, "--algorithm: required"},
		{"unknown algorithm", []string{"--algorithm", "token", "--rate", "5"}, `--algorithm: unknown algorithm "token"`},
		{"algorithm and compare", with(tb, "--compare", "gcra"), "--compare: cannot be combined"},
		{"compare unknown", []string{"--compare", "gcra,nope", "--rate", "5"}, `--compare: unknown algorithm "nope"`},
		{"compare empty entry", []string{"--compare", "gcra,", "--rate", "5"}, `--compare: unknown algorithm ""`},
		{"compare twice", []string{"--compare", "gcra,fixed_window,gcra", "--rate", "5"}, "--compare: gcra appears twice"},
		{"compare leaky twice", []string{"--compare", "leaky_bucket,leaky_bucket:police", "--rate", "5"}, "--compare: leaky_bucket:police appears twice"},
		{"mode on gcra", []string{"--compare", "gcra:shape", "--rate", "5"}, "--compare: \"gcra:shape\": only leaky_bucket"},
		{"unknown mode", []string{"--algorithm", "leaky_bucket:slow", "--rate", "5"}, "--algorithm: \"leaky_bucket:slow\""},
		{"no rate", []string{"--algorithm", "gcra"}, "--rate: required"},
		{"rate zero", []string{"--algorithm", "gcra", "--rate", "0"}, "--rate: must be at least 1"},
		{"rate not a number", []string{"--algorithm", "gcra", "--rate", "ten"}, "-rate: parse error"},
		{"rate above a unit per ns", with(tb[:2], "--rate", "2000000000"), "--rate: 2000000000 per 1s is more than one unit per nanosecond"},
		{"period zero", with(tb, "--period", "0s"), "--period: must be positive"},
		{"period negative", with(tb, "--period", "-1s"), "--period: must be positive"},
		{"period too long", with(tb, "--period", "100000h"), "--period: must be at most"},
		{"period not a duration", with(tb, "--period", "1"), `-period: bad duration "1"`},
		{"period zero days", with(tb, "--period", "0d"), `-period: bad duration "0d"`},
		{"burst on a window", []string{"--algorithm", "fixed_window", "--rate", "5", "--burst", "5"}, "--burst: fixed_window takes no burst"},
		{"burst on windows only", []string{"--compare", "fixed_window,concurrency", "--rate", "5", "--burst", "5"}, "--burst: fixed_window takes no burst"},
		{"burst zero", with(tb, "--burst", "0"), "--burst: must be at least 1"},
		// 3 × 80000h is more than twice MaxPeriod.
		{"burst too slow to refill", []string{"--algorithm", "gcra", "--rate", "1", "--period", "80000h", "--burst", "3"}, "--burst: 3 units at 1 per"},
		{"shape on token bucket", with(tb, "--shape"), "--shape: only leaky_bucket shapes"},
		{"hold without concurrency", with(tb, "--hold", "1s"), "--hold: only concurrency"},
		{"hold zero", []string{"--algorithm", "concurrency", "--rate", "5", "--hold", "0s"}, "--hold: must be positive"},
		{"cost negative", with(tb, "--cost", "-1"), "--cost: must be from 0"},
		{"cost too big", with(tb, "--cost", "99999999999999"), "--cost: must be from 0"},
		{"unknown traffic", with(tb, "--traffic", "random"), `--traffic: want steady, burst, boundary or file, got "random"`},
		{"default rps too many", []string{"--algorithm", "gcra", "--rate", "1000000000"}, "--rps (default 2 × --rate per --period): 2000000000 per second for --duration 3s is 6000000000 requests"},
		{"rps zero", with(tb, "--rps", "0"), "--rps: must be positive"},
		{"rps negative", with(tb, "--rps", "-3"), "--rps: must be positive"},
		{"rps not a number", with(tb, "--rps", "fast"), `--rps: want a number of requests per second, got "fast"`},
		{"rps fraction", with(tb, "--rps", "1/3"), `--rps: want a number`},
		{"rps too many", with(tb, "--rps", "1e7", "--duration", "1s"), "--rps: 10000000 per second for --duration 1s is 10000000 requests"},
		{"rps with burst traffic", with(tb, "--traffic", "burst", "--rps", "3"), "--rps: only --traffic steady takes it, not --traffic burst"},
		{"every with steady traffic", with(tb, "--rps", "3", "--every", "1s"), "--every: only --traffic burst takes it"},
		{"file with boundary traffic", with(tb, "--traffic", "boundary", "--file", bad), "--file: only --traffic file takes it"},
		{"burst without size", with(tb, "--traffic", "burst", "--every", "1s"), "--burst-size and --every: both required"},
		{"burst without every", with(tb, "--traffic", "burst", "--burst-size", "3"), "--burst-size and --every: both required"},
		{"burst size zero", with(tb, "--traffic", "burst", "--burst-size", "0", "--every", "1s"), "--burst-size: must be at least 1"},
		{"every zero", with(tb, "--traffic", "burst", "--burst-size", "3", "--every", "0s"), "--every: must be positive"},
		{"burst too many", with(tb, "--traffic", "burst", "--burst-size", "1000000", "--every", "1s"), "--burst-size: 1000000 requests every 1s"},
		{"boundary too short", with(tb, "--traffic", "boundary", "--duration", "1s"), "--duration: boundary traffic runs until 1.1s"},
		{"boundary too many", []string{"--algorithm", "fixed_window", "--rate", "600000", "--traffic", "boundary"}, "--rate: boundary traffic sends 2 × --rate requests"},
		{"file not given", with(tb, "--traffic", "file"), "--file: required with --traffic file"},
		{"file missing", with(tb, "--traffic", "file", "--file", missing), "--file: open " + missing},
		{"file bad line", with(tb, "--traffic", "file", "--file", bad), bad + `:4: time "later" is neither`},
		{"file past duration", with(tb, "--traffic", "file", "--file", bad, "--duration", "50ms"), bad + ":2: time 100ms is not before 50ms"},
		{"duration zero", with(tb, steady[0], steady[1], "--duration", "0s"), "--duration: must be positive"},
		{"duration too long", with(tb, steady[0], steady[1], "--duration", "300000h"), "--duration: must be positive and at most"},
		{"step zero", with(tb, steady[0], steady[1], "--step", "0s"), "--step: must be positive"},
		{"step too fine", with(tb, steady[0], steady[1], "--step", "1ms", "--duration", "1h"), "--step: 1ms over --duration 1h0m0s makes 3600000 rows; at most 100000"},
		{"default step too fine", with(tb, steady[0], steady[1], "--duration", "10001s"), "--step (default --period / 10): 100ms over --duration 2h46m41s makes 100010 rows"},
		{"summary with csv", with(tb, steady[0], steady[1], "--format", "csv", "--summary"), "--summary: only --format text"},
		{"unknown format", with(tb, steady[0], steady[1], "--format", "json"), `--format: want text or csv, got "json"`},
		{"positional argument", with(tb, steady[0], steady[1], "extra"), `unexpected argument "extra"`},
		{"unknown flag", with(tb, "--burstsize", "3"), "flag provided but not defined: -burstsize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, append([]string{"simulate"}, tt.args...)...)
			if code != exitUsage {
				t.Errorf("exit code: got %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr: got %q, want it to contain %q", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
}

func TestSimulateUsageNamesEveryFlag(t *testing.T) {
	var b strings.Builder
	Usage(&b)
	fs, _ := newFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(b.String(), "--"+f.Name+" ") {
			t.Errorf("usage does not describe --%s", f.Name)
		}
	})
}

// simulateArgs parses a simulate command line and runs it, as runSimulate
// does, returning one outcome per limit.
func simulateArgs(t *testing.T, args ...string) []outcome {
	t.Helper()
	sim, err := Parse(args)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	out := make([]outcome, len(sim.limits))
	for i, l := range sim.limits {
		out[i] = simulate(l, sim.traffic, sim.clock, sim.hold)
	}
	return out
}

// column returns one field of every row.
func column(o outcome, field func(row) int64) []int64 {
	out := make([]int64, len(o.rows))
	for i, r := range o.rows {
		out[i] = field(r)
	}
	return out
}

func before(r row) int64   { return r.before }
func after(r row) int64    { return r.after }
func admitted(r row) int64 { return r.admitted }
func rejected(r row) int64 { return r.rejected }

func checkTotals(t *testing.T, o outcome, requests, admitted, rejected int64) {
	t.Helper()
	if o.requests != requests || o.admitted != admitted || o.rejected != rejected {
		t.Errorf("%s: got %d requests, %d admitted, %d rejected; want %d, %d, %d",
			limitLabel(o.limit), o.requests, o.admitted, o.rejected, requests, admitted, rejected)
	}
}

func checkColumn(t *testing.T, o outcome, name string, field func(row) int64, want []int64) {
	t.Helper()
	if got := column(o, field); !slices.Equal(got, want) {
		t.Errorf("%s %s: got %v, want %v", limitLabel(o.limit), name, got, want)
	}
}

// A token bucket of 5 refilling 1/s admits 5 of a burst of 10, then refills
// one token a second.
func TestTokenBucketBurst(t *testing.T) {
	for _, alg := range []string{"token_bucket", "gcra", "leaky_bucket"} {
		t.Run(alg, func(t *testing.T) {
			o := simulateArgs(t, "--algorithm", alg, "--rate", "1", "--burst", "5",
				"--traffic", "burst", "--burst-size", "10", "--every", "10s", "--duration", "20s", "--step", "1s")[0]
			checkTotals(t, o, 20, 10, 10)
			checkColumn(t, o, "admitted", admitted, []int64{5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0})
			checkColumn(t, o, "rejected", rejected, []int64{5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0})
			if alg == "leaky_bucket" {
				// The level is what the bucket holds: 5 − tokens.
				checkColumn(t, o, "level before", before, []int64{0, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 4, 3, 2, 1, 0, 0, 0, 0, 0})
				return
			}
			checkColumn(t, o, "tokens before", before, []int64{5, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 1, 2, 3, 4, 5, 5, 5, 5, 5})
			checkColumn(t, o, "tokens after", after, []int64{0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 0, 1, 2, 3, 4, 5, 5, 5, 5, 5})
			if o.maxInWindow != 5 {
				t.Errorf("max in any 1s: got %d, want 5", o.maxInWindow)
			}
		})
	}
}

// At 10 requests a second against 5 a second with a burst of 5, a token
// bucket admits its 5 tokens plus one every 200ms: 5 + ⌊9.9s/200ms⌋ = 54 of
// 100 requests. GCRA and a policing leaky bucket decide the same.
func TestTokenBucketSteady(t *testing.T) {
	outs := simulateArgs(t, "--compare", "token_bucket,gcra,leaky_bucket", "--rate", "5", "--burst", "5",
		"--rps", "10", "--duration", "10s", "--step", "1s")
	tb := outs[0]
	checkTotals(t, tb, 100, 54, 46)
	// 0 to 800ms: 9 requests pass; later, one in two.
	checkColumn(t, tb, "admitted", admitted, []int64{9, 5, 5, 5, 5, 5, 5, 5, 5, 5})
	for _, o := range outs[1:] {
		checkColumn(t, o, "admitted", admitted, column(tb, admitted))
	}
}

// The window-edge attack: 10 requests in the 100ms before a window
// boundary and 10 in the 100ms after. A fixed window of 10/s admits all 20
// within 200ms; the sliding log admits 10; the sliding counter, which still
// weighs the previous window fully just after the boundary, admits 10.
func TestBoundaryAttack2x(t *testing.T) {
	outs := simulateArgs(t, "--compare", "fixed_window,sliding_window_counter,sliding_window_log",
		"--rate", "10", "--traffic", "boundary")
	want := map[string]struct{ admitted, maxInWindow int64 }{
		"fixed_window":           {20, 20},
		"sliding_window_counter": {10, 10},
		"sliding_window_log":     {10, 10},
	}
	for _, o := range outs {
		w := want[limitLabel(o.limit)]
		checkTotals(t, o, 20, w.admitted, 20-w.admitted)
		if o.maxInWindow != w.maxInWindow {
			t.Errorf("%s: max in any 1s: got %d, want %d", limitLabel(o.limit), o.maxInWindow, w.maxInWindow)
		}
	}
	fixed := outs[0]
	// Rows of 100ms over 3s: the attack is in rows 9 (900ms) and 10 (1s).
	if len(fixed.rows) != 30 {
		t.Fatalf("rows: got %d, want 30", len(fixed.rows))
	}
	if r := fixed.rows[10]; r.before != 0 || r.admitted != 10 || r.after != 10 {
		t.Errorf("fixed window at 1s: got count before %d, admitted %d, count after %d; want 0, 10, 10", r.before, r.admitted, r.after)
	}
}

// The sliding window counter's worst case: the previous window's units all
// at its end, and the next burst late in the current window, when they
// weigh little though they are still inside the sliding period.
func TestSlidingWindowCounterWorstCase(t *testing.T) {
	file := filepath.Join(t.TempDir(), "traffic.txt")
	var b strings.Builder
	for range 10 {
		b.WriteString("990ms\n")
	}
	for range 20 {
		b.WriteString("1.98\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	outs := simulateArgs(t, "--compare", "sliding_window_counter,sliding_window_log,fixed_window",
		"--rate", "10", "--traffic", "file", "--file", file)
	// At 1.98s the counter weighs the previous 10 as ⌈10 × 20ms/1s⌉ = 1
	// and admits 9 more, though the 10 from 990ms are 990ms old.
	want := map[string]struct{ admitted, maxInWindow int64 }{
		"sliding_window_counter": {19, 19},
		"sliding_window_log":     {10, 10},
		"fixed_window":           {20, 20},
	}
	for _, o := range outs {
		w := want[limitLabel(o.limit)]
		checkTotals(t, o, 30, w.admitted, 30-w.admitted)
		if o.maxInWindow != w.maxInWindow {
			t.Errorf("%s: max in any 1s: got %d, want %d", limitLabel(o.limit), o.maxInWindow, w.maxInWindow)
		}
	}
}

// A shaping leaky bucket of 10/s (one unit per 100ms) and depth 10 fed 20
// requests a second delays each by the backlog ahead of it, which grows
// 50ms per request, until the bucket is full.
func TestLeakyShapeDelays(t *testing.T) {
	outs := simulateArgs(t, "--compare", "leaky_bucket:shape,leaky_bucket:police", "--rate", "10",
		"--rps", "20", "--duration", "1s", "--step", "100ms")
	shape, police := outs[0], outs[1]
	// Request k arrives at 50k ms and waits 50k ms; request 19 would need
	// 950ms + 100ms > 1s of depth.
	checkTotals(t, shape, 20, 19, 1)
	checkTotals(t, police, 20, 19, 1)
	var want []time.Duration
	for r := range 9 {
		want = append(want, time.Duration(100*r+50)*ms)
	}
	want = append(want, 900*ms)
	var got []time.Duration
	for _, r := range shape.rows {
		got = append(got, r.maxDelay)
	}
	if !slices.Equal(got, want) {
		t.Errorf("shape max delay per row: got %v, want %v", got, want)
	}
	if shape.maxDelay != 900*ms {
		t.Errorf("shape max delay: got %v, want 900ms", shape.maxDelay)
	}
	if police.maxDelay != 0 {
		t.Errorf("police max delay: got %v, want 0", police.maxDelay)
	}
	// The level rises one unit per row: two arrive, one drains.
	checkColumn(t, shape, "level before", before, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
}

// Two requests in flight at most, each held 300ms, offered one every
// 100ms: a third waits for the first release.
func TestConcurrencyHold(t *testing.T) {
	t.Run("released", func(t *testing.T) {
		o := simulateArgs(t, "--algorithm", "concurrency", "--rate", "2", "--hold", "300ms",
			"--rps", "10", "--duration", "1s", "--step", "100ms")[0]
		// Admitted at 0, 100, 300, 400, 600, 700, 900ms: each release at
		// +300ms lets one more in.
		checkTotals(t, o, 10, 7, 3)
		checkColumn(t, o, "admitted", admitted, []int64{1, 1, 0, 1, 1, 0, 1, 1, 0, 1})
		checkColumn(t, o, "in flight before", before, []int64{0, 1, 2, 1, 1, 2, 1, 1, 2, 1})
		checkColumn(t, o, "in flight after", after, []int64{1, 2, 2, 2, 2, 2, 2, 2, 2, 2})
	})
	t.Run("default hold", func(t *testing.T) {
		// 100ms: each request is released just as the next arrives.
		o := simulateArgs(t, "--algorithm", "concurrency", "--rate", "1",
			"--rps", "10", "--duration", "1s", "--step", "100ms")[0]
		checkTotals(t, o, 10, 10, 0)
	})
	t.Run("never released in time", func(t *testing.T) {
		// Held longer than the run: only the lease expiry after --period
		// (1s) frees a unit.
		o := simulateArgs(t, "--algorithm", "concurrency", "--rate", "2", "--hold", "10s", "--period", "1s",
			"--rps", "10", "--duration", "1500ms", "--step", "100ms")[0]
		// Admitted at 0 and 100ms; their leases expire at 1s and 1.1s,
		// admitting the requests then.
		checkTotals(t, o, 15, 4, 11)
		checkColumn(t, o, "admitted", admitted, []int64{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0})
	})
}

// Windows count per window aligned to the epoch: a steady 3/s against 2/s
// admits the first two of every second.
func TestFixedWindowSteady(t *testing.T) {
	o := simulateArgs(t, "--algorithm", "fixed_window", "--rate", "2", "--rps", "3",
		"--duration", "3s", "--step", "1s")[0]
	checkTotals(t, o, 9, 6, 3)
	checkColumn(t, o, "count before", before, []int64{0, 0, 0})
	checkColumn(t, o, "count after", after, []int64{2, 2, 2})
}

func TestCostAboveCapacity(t *testing.T) {
	code, stdout, stderr := runArgs(t, "simulate", "--algorithm", "token_bucket", "--rate", "5",
		"--cost", "6", "--rps", "1", "--duration", "3s", "--step", "1s")
	if code != exitOK {
		t.Fatalf("exit code: got %d, want 0 (stderr %q)", code, stderr)
	}
	if !strings.Contains(stdout, "note: requests costing more than the capacity 5 are denied with retry-after never") {
		t.Errorf("stdout: got %q, want a note on the capacity", stdout)
	}
	o := simulateArgs(t, "--algorithm", "token_bucket", "--rate", "5", "--cost", "6", "--rps", "1", "--duration", "3s")[0]
	checkTotals(t, o, 3, 0, 3)
	if !o.never {
		t.Errorf("never: got false, want true")
	}
}

// The file's cost column overrides --cost; a cost-0 request always passes.
func TestFileCosts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "traffic.txt")
	if err := os.WriteFile(file, []byte("0 3\n0.1 3\n0.2 0\n0.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := simulateArgs(t, "--algorithm", "sliding_window_log", "--rate", "5", "--cost", "2",
		"--traffic", "file", "--file", file, "--step", "100ms")[0]
	// 3 passes, 3 more would make 6 > 5, 0 passes, 2 makes 5.
	checkColumn(t, o, "admitted", admitted, []int64{1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	// The 3 units of 0s leave the window (now − 1s, now] at 1s, the 2 of
	// 300ms at 1.3s.
	checkColumn(t, o, "in window after", after, []int64{3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if o.maxInWindow != 5 {
		t.Errorf("max in any 1s: got %d units, want 5", o.maxInWindow)
	}
}

// Without --duration, a file's traffic runs 3 periods, or until the row
// after its last request.
func TestFileDefaultDuration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "traffic.txt")
	if err := os.WriteFile(file, []byte("4.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim, err := Parse([]string{"--algorithm", "gcra", "--rate", "1", "--traffic", "file", "--file", file, "--step", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if sim.clock.duration != 5*time.Second {
		t.Errorf("duration: got %v, want 5s", sim.clock.duration)
	}
}

func TestSimulateText(t *testing.T) {
	code, stdout, stderr := runArgs(t, "simulate", "--algorithm", "token_bucket", "--rate", "1", "--burst", "5",
		"--traffic", "burst", "--burst-size", "10", "--every", "10s", "--duration", "3s", "--step", "1s")
	if code != exitOK || stderr != "" {
		t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
	}
	// The rows compared field by field, so that alignment may change.
	want := [][]string{
		{"clock:", "3s", "from", "2026-01-05T00:00:00Z,", "rows", "of", "1s"},
		{"traffic:", "bursts", "of", "10", "requests", "every", "10s"},
		{"token_bucket", "1/1s", "burst", "5"},
		{"time", "tokens", "before", "requests", "admitted", "rejected", "tokens", "after"},
		{"0s", "5", "10", "5", "5", "0"},
		{"1s", "1", "0", "0", "0", "1"},
		{"2s", "2", "0", "0", "0", "2"},
		{"summary"},
		{"limit", "requests", "admitted", "rejected", "max", "admitted", "in", "any", "1s"},
		{"token_bucket", "1/1s", "burst", "5", "10", "5", "5", "5"},
	}
	if got := fields(stdout); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got\n%s\nwant the rows %q", stdout, want)
	}
}

func TestSimulateSummaryOnly(t *testing.T) {
	code, stdout, stderr := runArgs(t, "simulate", "--compare", "fixed_window,sliding_window_log", "--rate", "10",
		"--traffic", "boundary", "--summary")
	if code != exitOK || stderr != "" {
		t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
	}
	want := [][]string{
		{"clock:", "3s", "from", "2026-01-05T00:00:00Z,", "rows", "of", "100ms"},
		{"traffic:", "boundary", "attack,", "10", "requests", "before", "a", "window", "boundary", "and", "10", "after"},
		{"summary"},
		{"limit", "requests", "admitted", "rejected", "max", "admitted", "in", "any", "1s"},
		{"fixed_window", "10/1s", "20", "20", "0", "20"},
		{"sliding_window_log", "10/1s", "20", "10", "10", "10"},
	}
	if got := fields(stdout); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got\n%s\nwant the rows %q", stdout, want)
	}
}

// fields splits text into its non-empty lines' fields.
func fields(text string) [][]string {
	var out [][]string
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

func TestSimulateCSV(t *testing.T) {
	code, stdout, stderr := runArgs(t, "simulate", "--compare", "leaky_bucket:shape,fixed_window", "--rate", "2",
		"--rps", "4", "--duration", "1s", "--step", "500ms", "--format", "csv")
	if code != exitOK || stderr != "" {
		t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
	}
	records, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"algorithm", "time_s", "state", "before", "requests", "admitted", "rejected", "max_delay_s", "after"},
		// 4/s against 2/s, depth 2: requests at 0 and 250ms pass, the
		// second waiting 250ms for the first to drain its 500ms.
		{"leaky_bucket:shape", "0", "level", "0", "2", "2", "0", "0.25", "2"},
		{"leaky_bucket:shape", "0.5", "level", "1", "2", "1", "1", "0.5", "2"},
		{"fixed_window", "0", "count", "0", "2", "2", "0", "0", "2"},
		{"fixed_window", "0.5", "count", "2", "2", "0", "2", "0", "2"},
	}
	if !slices.EqualFunc(records, want, slices.Equal) {
		t.Errorf("got\n%s\nwant %q", stdout, want)
	}
}

func TestHoldNote(t *testing.T) {
	// The default hold, 100ms, outlives a 50ms lease too.
	_, _, stderr := runArgs(t, "simulate", "--compare", "gcra,concurrency", "--rate", "2", "--period", "50ms", "--rps", "1")
	if !strings.Contains(stderr, "note: --hold 100ms is not shorter than --period 50ms") {
		t.Errorf("default hold: stderr: got %q, want a note on --hold", stderr)
	}
	_, _, stderr = runArgs(t, "simulate", "--algorithm", "gcra", "--rate", "2", "--period", "50ms", "--rps", "1")
	if stderr != "" {
		t.Errorf("no concurrency: stderr: got %q, want nothing", stderr)
	}

	code, _, stderr := runArgs(t, "simulate", "--algorithm", "concurrency", "--rate", "2", "--hold", "2s",
		"--rps", "1", "--duration", "2s")
	if code != exitOK {
		t.Fatalf("exit code: got %d, want 0", code)
	}
	if !strings.Contains(stderr, "note: --hold 2s is not shorter than --period 1s") {
		t.Errorf("stderr: got %q, want a note on --hold", stderr)
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {time.Second, "1"}, {1500 * ms, "1.5"}, {1, "0.000000001"}, {-250 * ms, "-0.25"}, {90 * time.Second, "90"},
	}
	for _, tt := range tests {
		if got := seconds(tt.d); got != tt.want {
			t.Errorf("seconds(%v): got %q, want %q", tt.d, got, tt.want)
		}
	}
}

// FuzzSimulateArgs checks that no command line panics and that every one
// ends with a known exit code.
func FuzzSimulateArgs(f *testing.F) {
	for _, seed := range []string{
		"--algorithm token_bucket --rate 5 --rps 10",
		"--compare fixed_window,sliding_window_counter --rate 10 --traffic boundary",
		"--algorithm concurrency --rate 2 --hold 300ms --rps 10 --duration 1s",
		"--algorithm leaky_bucket:shape --rate 3 --traffic burst --burst-size 5 --every 700ms",
		"--algorithm gcra --rate 1 --period 1ns --rps 1e9 --duration 1ms --step 1us",
		"--algorithm fixed_window --rate 1000000000 --period 1s --rps 3 --format csv",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if slices.Contains(args, "--file") || slices.Contains(args, "-file") {
			t.Skip("reads files")
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "svg") }) {
			t.Skip("writes files")
		}
		switch code, _, _ := runArgs(t, append([]string{"simulate"}, args...)...); code {
		case exitOK, exitUsage:
		default:
			t.Errorf("exit code %d for %q", code, line)
		}
	})
}

// Without --rps, steady traffic is twice the limit, so that a first run
// shows the limit refusing.
func TestSimulateDefaultTraffic(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want [][]string
	}{
		{"gcra", []string{"--algorithm", "gcra", "--rate", "5", "--summary"}, [][]string{
			{"clock:", "3s", "from", "2026-01-05T00:00:00Z,", "rows", "of", "100ms"},
			{"traffic:", "steady,", "10", "requests", "per", "1s", "(2", "×", "--rate,", "the", "default)"},
			{"summary"},
			{"limit", "requests", "admitted", "rejected", "max", "admitted", "in", "any", "1s"},
			// The burst of 5, then one in two.
			{"gcra", "5/1s", "burst", "5", "30", "19", "11", "9"},
		}},
		{"period in days", []string{"--algorithm", "fixed_window", "--rate", "5", "--period", "1d", "--summary"}, [][]string{
			{"clock:", "72h0m0s", "from", "2026-01-05T00:00:00Z,", "rows", "of", "2h24m0s"},
			{"traffic:", "steady,", "10", "requests", "per", "24h0m0s", "(2", "×", "--rate,", "the", "default)"},
			{"summary"},
			{"limit", "requests", "admitted", "rejected", "max", "admitted", "in", "any", "24h0m0s"},
			{"fixed_window", "5/24h0m0s", "30", "15", "15", "5"},
		}},
		{"concurrency", []string{"--algorithm", "concurrency", "--rate", "2", "--duration", "1s", "--summary"}, [][]string{
			{"clock:", "1s", "from", "2026-01-05T00:00:00Z,", "rows", "of", "100ms"},
			{"traffic:", "steady,", "4", "requests", "per", "100ms", "(2", "×", "--rate,", "the", "default)"},
			{"summary"},
			{"limit", "requests", "admitted", "rejected", "max", "admitted", "in", "any", "1s"},
			{"concurrency", "2/1s", "40", "20", "20", "20"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, append([]string{"simulate"}, tt.args...)...)
			if code != exitOK || stderr != "" {
				t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if got := fields(stdout); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("got\n%s\nwant the rows %q", stdout, tt.want)
			}
		})
	}
}

// Every duration flag takes whole days, as config files do.
func TestSimulateDurationDays(t *testing.T) {
	sim, err := Parse([]string{"--algorithm", "fixed_window", "--rate", "5", "--period", "1d",
		"--traffic", "burst", "--burst-size", "3", "--every", "2d", "--duration", "7d", "--step", "1d"})
	if err != nil {
		t.Fatal(err)
	}
	const day = 24 * time.Hour
	if got, want := sim.limits[0].Period, day; got != want {
		t.Errorf("period: got %v, want %v", got, want)
	}
	if got, want := sim.clock, (clock{start: simStart.UnixNano(), duration: 7 * day, step: day}); got != want {
		t.Errorf("clock: got %+v, want %+v", got, want)
	}
	if got, want := len(sim.traffic), 12; got != want {
		t.Errorf("requests: got %d, want %d (bursts of 3 at 0, 2d, 4d, 6d)", got, want)
	}
}
