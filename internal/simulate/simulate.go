package simulate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// simStart is the virtual instant every simulation starts at: a Monday at
// midnight UTC, so that windows of a second, minute, hour or day, which are
// aligned to the Unix epoch, start with the simulation.
var simStart = time.Date(2026, time.January, 5, 0, 0, 0, 0, time.UTC)

const (
	// maxDuration bounds --duration: thirty years of 365.25 days, which
	// holds three of the longest periods a limit may have.
	maxDuration = 30 * 8766 * time.Hour
	// maxRows bounds the rows of one table.
	maxRows = 100_000
	// maxCost bounds a request's cost, as bouncer bounds a rate.
	maxCost = bouncer.MaxRate
	// defaultHold is how long a concurrency request stays in flight.
	defaultHold = 100 * time.Millisecond
)

// Usage writes the simulate command's usage: every flag Parse takes.
func Usage(w io.Writer) {
	fmt.Fprint(w, `Usage: bouncer simulate --algorithm NAME --rate N [flags]
       bouncer simulate --compare NAME,NAME,... --rate N [flags]

Runs rate-limit algorithms over a traffic pattern on a virtual clock (it never
sleeps) and prints, per row of --step, the requests, how many were admitted
and rejected, the longest shaping delay, and the limit's state before the
row's requests and after the last of them. A summary follows: the totals, and
the most units admitted within any span of one --period (what a limit of
--rate per --period should hold to). It calls the same algorithm code as the
stores, on one key.

The state column is the tokens left (token_bucket, gcra), the queued units
(leaky_bucket "level"), the window's count (fixed_window), the weighted count
(sliding_window_counter "estimate"), the units admitted in the last period
(sliding_window_log "in window") or the units in flight (concurrency).

The clock starts at 2026-01-05T00:00:00Z; times are offsets from it. Windows
are aligned to the Unix epoch, as in every store. Every duration (D) is a Go
duration such as 100ms, 90s or 1h, or whole days such as 1d, as in config files.

Limit:
  --algorithm NAME   token_bucket, gcra, leaky_bucket, fixed_window,
                     sliding_window_log, sliding_window_counter or concurrency
  --compare LIST     several algorithms, comma-separated, on the same traffic:
                     one table each, then one summary; leaky_bucket:shape and
                     leaky_bucket:police choose the mode of one entry
  --rate N           units per --period; for concurrency, units in flight (required)
  --period D         the rate's period, a window's length, or how long a
                     concurrency lease lives when not released (default 1s)
  --burst N          capacity of token_bucket and gcra, queue depth of
                     leaky_bucket (default --rate); other algorithms take none,
                     and with --compare they ignore it
  --shape            leaky_bucket admits overflow with a delay instead of
                     rejecting it (default false: police)

Traffic:
  --traffic KIND     steady, burst, boundary or file (default steady)
      steady         --rps R requests per second, evenly spaced from 0
                     (R may be a decimal, such as 0.5; default twice the
                     limit: 2 × --rate per --period, or for concurrency
                     2 × --rate per --hold)
      burst          --burst-size N requests at once at 0, --every D, 2×--every, ...
      boundary       --rate requests over the last tenth of a period before
                     the first window boundary, and --rate more over the
                     first tenth after it: the window-edge attack
      file           --file PATH: one request per line, as its time from the
                     start (a duration like 150ms, or seconds like 0.15) and
                     an optional cost; "#" starts a comment
  --cost N           units per request (default 1); in a file, for lines
                     without a cost
  --hold D           how long an admitted concurrency request stays in
                     flight before it is released (default 100ms)

Clock and output:
  --duration D       simulated time (default 3 × --period; with --traffic file,
                     longer if needed to include the last request)
  --step D           the time one table row covers (default --period / 10)
  --format F         text or csv (default text); csv has the rows only
  --summary          print only the summary, not the per-row tables
  --svg FILE         also write the run to FILE as an SVG chart: one panel per
                     algorithm on a shared time axis, with what was offered
                     and admitted per row, the rate, the window boundaries
                     and the most admitted in any --period

Examples:
  bouncer simulate --algorithm token_bucket --rate 1 --burst 5 --traffic burst --burst-size 10 --every 10s --duration 10s --step 1s
  bouncer simulate --compare fixed_window,sliding_window_counter,sliding_window_log --rate 10 --traffic boundary
  bouncer simulate --compare fixed_window,sliding_window_log --rate 10 --traffic boundary --summary --svg boundary.svg
  bouncer simulate --compare leaky_bucket:police,leaky_bucket:shape --rate 5 --burst 5 --traffic burst --burst-size 8 --every 2s
`)
}

// Simulation is a validated simulate command line, ready to Run.
type Simulation struct {
	limits  []bouncer.Limit
	traffic []arrival
	clock   clock
	hold    time.Duration
	csv     bool
	// svg is the file to write the chart to, or "" for none.
	svg string
	// summaryOnly leaves out the per-row tables.
	summaryOnly bool
	// describe says in words what traffic is, for the text output.
	describe string
	// notes are warnings about the run, printed to stderr.
	notes []string
}

// Notes returns warnings about the run, for the caller to print apart
// from its output.
func (sim *Simulation) Notes() []string { return sim.notes }

// Run runs every limit over the traffic and writes the tables (text or
// CSV) to w, then the SVG chart to its file if --svg named one. Its errors
// are of writing, not of the command line, which Parse checked.
func (sim *Simulation) Run(w io.Writer) error {
	outcomes := make([]outcome, len(sim.limits))
	for i, l := range sim.limits {
		outcomes[i] = simulate(l, sim.traffic, sim.clock, sim.hold)
	}
	var err error
	if sim.csv {
		err = writeCSV(w, outcomes)
	} else {
		err = writeText(w, sim, outcomes)
	}
	if err == nil && sim.svg != "" {
		err = writeSVGFile(sim.svg, sim, outcomes)
	}
	return err
}

func writeSVGFile(name string, sim *Simulation, outcomes []outcome) error {
	fh, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("--svg: %v", err)
	}
	if err := writeSVG(fh, sim, outcomes); err != nil {
		fh.Close()
		return fmt.Errorf("--svg: %v", err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("--svg: %v", err)
	}
	return nil
}

// simFlags holds the command line as parsed, before validation.
type simFlags struct {
	algorithm, compare, traffic, rps, file, format, svg string
	rate, burst, burstSize, cost                        int64
	period, every, duration, step, hold                 time.Duration
	shape, summary                                      bool
	set                                                 map[string]bool
}

// FlagSet returns the flags Parse takes, for a caller that checks their
// names against its other commands'.
func FlagSet() *flag.FlagSet {
	fs, _ := newFlags()
	return fs
}

func newFlags() (*flag.FlagSet, *simFlags) {
	f := &simFlags{set: map[string]bool{}}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.algorithm, "algorithm", "", "")
	fs.StringVar(&f.compare, "compare", "", "")
	fs.Int64Var(&f.rate, "rate", 0, "")
	durationVar(fs, &f.period, "period", time.Second, "the rate's period (a duration such as 1s, 1h or 1d)")
	fs.Int64Var(&f.burst, "burst", 0, "")
	fs.BoolVar(&f.shape, "shape", false, "")
	fs.StringVar(&f.traffic, "traffic", "steady", "")
	fs.StringVar(&f.rps, "rps", "", "requests per second of --traffic steady (default 2 × --rate per --period; for concurrency, 2 × --rate per --hold)")
	fs.Int64Var(&f.burstSize, "burst-size", 0, "")
	durationVar(fs, &f.every, "every", 0, "")
	fs.StringVar(&f.file, "file", "", "")
	fs.Int64Var(&f.cost, "cost", 1, "")
	durationVar(fs, &f.hold, "hold", defaultHold, "")
	durationVar(fs, &f.duration, "duration", 0, "")
	durationVar(fs, &f.step, "step", 0, "")
	fs.StringVar(&f.format, "format", "text", "")
	fs.BoolVar(&f.summary, "summary", false, "")
	fs.StringVar(&f.svg, "svg", "", "also write the run to this file as an SVG chart")
	return fs, f
}

// durationVar defines a duration flag that takes whole days ("1d") too, as
// config files do.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// durationValue is a flag.Value read by yamlconf.ParseDuration.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := yamlconf.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// Parse parses and validates a simulate command line (the arguments after
// "simulate"). Its errors name the flag at fault.
func Parse(args []string) (*Simulation, error) {
	fs, f := newFlags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })

	sim := &Simulation{hold: f.hold}
	var err error
	if sim.limits, err = f.limits(); err != nil {
		return nil, err
	}
	if err := f.checkCost(); err != nil {
		return nil, err
	}
	if err := f.checkHold(sim, sim.limits); err != nil {
		return nil, err
	}
	switch f.format {
	case "text":
	case "csv":
		if f.summary {
			return nil, errors.New("--summary: only --format text has a summary")
		}
		sim.csv = true
	default:
		return nil, fmt.Errorf("--format: want text or csv, got %q", f.format)
	}
	sim.summaryOnly = f.summary
	if f.set["svg"] && f.svg == "" {
		return nil, errors.New("--svg: want a file name")
	}
	sim.svg = f.svg
	if err := f.buildTraffic(sim); err != nil {
		return nil, err
	}
	return sim, nil
}

// limits returns the limits that --algorithm or --compare name.
func (f *simFlags) limits() ([]bouncer.Limit, error) {
	var names []string
	flagName := "--algorithm"
	switch {
	case f.set["algorithm"] && f.set["compare"]:
		return nil, errors.New("--compare: cannot be combined with --algorithm")
	case f.set["algorithm"]:
		names = []string{f.algorithm}
	case f.set["compare"]:
		flagName = "--compare"
		names = strings.Split(f.compare, ",")
	default:
		return nil, errors.New("--algorithm: required (or --compare)")
	}
	if !f.set["rate"] {
		return nil, errors.New("--rate: required")
	}
	var (
		limits                       []bouncer.Limit
		seen                         = map[string]bool{}
		usesBurst, leaky, concurrent bool
	)
	for _, name := range names {
		name = strings.TrimSpace(name)
		l, err := f.limit(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", flagName, err)
		}
		label := limitLabel(l)
		if seen[label] {
			return nil, fmt.Errorf("%s: %s appears twice", flagName, label)
		}
		seen[label] = true
		if err := l.Validate(); err != nil {
			return nil, f.limitError(l, err)
		}
		usesBurst = usesBurst || l.Algorithm.UsesBurst()
		leaky = leaky || l.Algorithm == bouncer.LeakyBucket
		concurrent = concurrent || l.Algorithm == bouncer.Concurrency
		limits = append(limits, l)
	}
	switch {
	case f.set["burst"] && !usesBurst:
		return nil, fmt.Errorf("--burst: %s takes no burst (only token_bucket, gcra and leaky_bucket do)", limits[0].Algorithm)
	case f.set["shape"] && !leaky:
		return nil, errors.New("--shape: only leaky_bucket shapes")
	case f.set["hold"] && !concurrent:
		return nil, errors.New("--hold: only concurrency holds requests in flight")
	}
	return limits, nil
}

// limit builds the limit for one algorithm name, which may carry a
// leaky_bucket mode: leaky_bucket:shape or leaky_bucket:police.
func (f *simFlags) limit(name string) (bouncer.Limit, error) {
	algName, mode, hasMode := strings.Cut(name, ":")
	a, err := bouncer.ParseAlgorithm(algName)
	if err != nil {
		return bouncer.Limit{}, fmt.Errorf("unknown algorithm %q; want one of %s", algName, algorithmList())
	}
	l := bouncer.Limit{Algorithm: a, Rate: f.rate, Period: f.period}
	if a.UsesBurst() {
		l.Burst = f.rate
		if f.set["burst"] {
			l.Burst = f.burst
		}
	}
	if a == bouncer.LeakyBucket {
		l.Shape = f.shape
	}
	if hasMode {
		switch {
		case a != bouncer.LeakyBucket:
			return bouncer.Limit{}, fmt.Errorf("%q: only leaky_bucket takes :shape or :police", name)
		case mode == "shape":
			l.Shape = true
		case mode == "police":
			l.Shape = false
		default:
			return bouncer.Limit{}, fmt.Errorf("%q: want leaky_bucket:shape or leaky_bucket:police", name)
		}
	}
	return l, nil
}

// limitError turns a *bouncer.LimitError into an error naming the flag.
func (f *simFlags) limitError(l bouncer.Limit, err error) error {
	var le *bouncer.LimitError
	if !errors.As(err, &le) {
		return err
	}
	name := "--" + le.Field
	if le.Field == "burst" && !f.set["burst"] {
		name = "--burst (default --rate)"
	}
	return fmt.Errorf("%s: %s (%s)", name, le.Reason, l.Algorithm)
}

func (f *simFlags) checkCost() error {
	if f.cost < 0 || f.cost > maxCost {
		return fmt.Errorf("--cost: must be from 0 to %d, got %d", int64(maxCost), f.cost)
	}
	return nil
}

func (f *simFlags) checkHold(sim *Simulation, limits []bouncer.Limit) error {
	if f.hold <= 0 {
		return fmt.Errorf("--hold: must be positive, got %v", f.hold)
	}
	concurrent := slices.ContainsFunc(limits, func(l bouncer.Limit) bool { return l.Algorithm == bouncer.Concurrency })
	if concurrent && f.hold >= f.period {
		sim.notes = append(sim.notes, fmt.Sprintf(
			"--hold %v is not shorter than --period %v: leases expire before their requests release them, and a late release frees another request's lease",
			f.hold, f.period))
	}
	return nil
}

// trafficFlags lists the flags that only one traffic kind takes.
var trafficFlags = []struct{ kind, flag string }{
	{"steady", "rps"},
	{"burst", "burst-size"},
	{"burst", "every"},
	{"file", "file"},
}

// buildTraffic generates the traffic and fixes the clock.
func (f *simFlags) buildTraffic(sim *Simulation) error {
	duration, step, err := f.span()
	if err != nil {
		return err
	}
	if duration, err = f.generate(sim, duration, step); err != nil {
		return err
	}
	if rows := (duration + step - 1) / step; rows > maxRows {
		name := "--step"
		if !f.set["step"] {
			name = "--step (default --period / 10)"
		}
		return fmt.Errorf("%s: %v over --duration %v makes %d rows; at most %d", name, step, duration, rows, maxRows)
	}
	switch {
	case f.traffic == "file":
		sim.describe += fmt.Sprintf(", cost %d where a line gives none", f.cost)
	case f.set["cost"]:
		sim.describe += fmt.Sprintf(", cost %d", f.cost)
	}
	sim.clock = clock{start: simStart.UnixNano(), duration: duration, step: step}
	return nil
}

// span checks --traffic and the flags that go with it, and returns the
// run's duration and step (a traffic file may lengthen the run).
func (f *simFlags) span() (duration, step time.Duration, err error) {
	switch f.traffic {
	case "steady", "burst", "boundary", "file":
	default:
		return 0, 0, fmt.Errorf("--traffic: want steady, burst, boundary or file, got %q", f.traffic)
	}
	for _, tf := range trafficFlags {
		if f.set[tf.flag] && tf.kind != f.traffic {
			return 0, 0, fmt.Errorf("--%s: only --traffic %s takes it, not --traffic %s", tf.flag, tf.kind, f.traffic)
		}
	}
	duration = min(3*f.period, maxDuration)
	if f.set["duration"] {
		if f.duration <= 0 || f.duration > maxDuration {
			return 0, 0, fmt.Errorf("--duration: must be positive and at most %v, got %v", maxDuration, f.duration)
		}
		duration = f.duration
	}
	step = max(f.period/10, 1)
	if f.set["step"] {
		if f.step <= 0 {
			return 0, 0, fmt.Errorf("--step: must be positive, got %v", f.step)
		}
		step = f.step
	}
	return duration, step, nil
}

// generate makes sim's traffic of the kind --traffic names, and says
// what it is; it returns the run's duration, which a traffic file's last
// request may lengthen.
func (f *simFlags) generate(sim *Simulation, duration, step time.Duration) (time.Duration, error) {
	var err error
	switch f.traffic {
	case "steady":
		err = f.steady(sim, duration)
	case "burst":
		if !f.set["burst-size"] || !f.set["every"] {
			return 0, errors.New("--burst-size and --every: both required with --traffic burst")
		}
		sim.traffic, err = burstTraffic(f.burstSize, f.every, duration, f.cost)
		sim.describe = fmt.Sprintf("bursts of %d requests every %v", f.burstSize, f.every)
	case "boundary":
		sim.traffic, err = boundaryAttack(simStart.UnixNano(), f.period, f.rate, duration, f.cost)
		sim.describe = fmt.Sprintf("boundary attack, %d requests before a window boundary and %d after", f.rate, f.rate)
	case "file":
		if f.file == "" {
			return 0, errors.New("--file: required with --traffic file")
		}
		maxAt := maxDuration
		if f.set["duration"] {
			maxAt = duration
		}
		sim.traffic, err = readTrafficFile(f.file, f.cost, maxAt)
		if err == nil && !f.set["duration"] && len(sim.traffic) > 0 {
			// Run until the row after the last request's.
			last := sim.traffic[len(sim.traffic)-1].at
			duration = max(duration, min((last/step+1)*step, maxDuration))
		}
		sim.describe = fmt.Sprintf("%d requests from %s", len(sim.traffic), f.file)
	}
	return duration, err
}

// steady makes sim's steady traffic: --rps, or by default twice the
// limit, so that the run shows it refusing.
func (f *simFlags) steady(sim *Simulation, duration time.Duration) error {
	if f.set["rps"] {
		rps, ok := new(big.Rat).SetString(f.rps)
		if !ok || strings.Contains(f.rps, "/") || len(f.rps) > maxOffsetLen {
			return fmt.Errorf("--rps: want a number of requests per second, got %q", f.rps)
		}
		var err error
		sim.traffic, err = steadyTraffic(rps, duration, f.cost)
		sim.describe = fmt.Sprintf("steady, %s requests per second", trimRat(rps))
		return err
	}
	per, name := f.period, "--rps (default 2 × --rate per --period)"
	if len(sim.limits) == 1 && sim.limits[0].Algorithm == bouncer.Concurrency {
		per, name = f.hold, "--rps (default 2 × --rate per --hold)"
	}
	rps := new(big.Rat).SetFrac(big.NewInt(2*f.rate), big.NewInt(int64(per)))
	rps.Mul(rps, big.NewRat(int64(time.Second), 1))
	var err error
	sim.traffic, err = steadyTraffic(rps, duration, f.cost)
	if err != nil {
		err = fmt.Errorf("%s%s", name, strings.TrimPrefix(err.Error(), "--rps"))
	}
	sim.describe = fmt.Sprintf("steady, %d requests per %v (2 × --rate, the default)", 2*f.rate, per)
	return err
}

func readTrafficFile(name string, cost int64, maxAt time.Duration) ([]arrival, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--file: %v", err)
	}
	defer fh.Close()
	return readTraffic(name, fh, cost, maxAt)
}

// trimRat formats r as a decimal without trailing zeros, to 3 places.
func trimRat(r *big.Rat) string {
	s := r.FloatString(3)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// limitLabel names a limit in tables: its algorithm, and for a leaky
// bucket its mode.
func limitLabel(l bouncer.Limit) string {
	switch {
	case l.Algorithm != bouncer.LeakyBucket:
		return l.Algorithm.String()
	case l.Shape:
		return "leaky_bucket:shape"
	}
	return "leaky_bucket:police"
}

func algorithmList() string {
	var names []string
	for _, a := range bouncer.Algorithms() {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}
