package simulate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var updateSVG = flag.Bool("update", false, "rewrite the golden SVG files in testdata")

// boundaryArgs is the README's run of the window-edge attack.
var boundaryArgs = []string{"--compare", "fixed_window,sliding_window_log,sliding_window_counter",
	"--rate", "100", "--period", "1m", "--traffic", "boundary", "--duration", "2m", "--step", "6s"}

// svgElem is one element of a chart, as a test reads it.
type svgElem struct {
	name  string
	attrs map[string]string
	text  string // the character data of a text element
}

// svgDoc is a parsed chart: its elements in document order.
type svgDoc struct{ elems []svgElem }

// parseSVG parses a chart strictly, failing t if it is not well-formed XML
// with an svg root in the SVG namespace.
func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var open []int // indexes of the open elements
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(doc.elems) == 0 && (tok.Name.Space != "http://www.w3.org/2000/svg" || tok.Name.Local != "svg") {
				t.Errorf("root element: got %q %q, want svg in the SVG namespace", tok.Name.Space, tok.Name.Local)
			}
			e := svgElem{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			open = append(open, len(doc.elems))
			doc.elems = append(doc.elems, e)
		case xml.CharData:
			if len(open) > 0 {
				doc.elems[open[len(open)-1]].text += string(tok)
			}
		case xml.EndElement:
			open = open[:len(open)-1]
		}
	}
	return doc
}

// find returns the elements named name of class class, in order.
func (d svgDoc) find(name, class string) []svgElem {
	var out []svgElem
	for _, e := range d.elems {
		if e.name == name && e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

// texts returns every text element's text.
func (d svgDoc) texts() []string {
	var out []string
	for _, e := range d.elems {
		if e.name == "text" {
			out = append(out, e.text)
		}
	}
	return out
}

// attrs returns attribute a of every element of es.
func attrs(es []svgElem, a string) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.attrs[a])
	}
	return out
}

// runSVG runs simulate with --summary --svg and returns the chart and the
// summary's "max admitted in any …" figure of each limit, in order.
func runSVG(t *testing.T, args ...string) (data []byte, most []string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "chart.svg")
	code, stdout, stderr := runArgs(t, append([]string{"simulate", "--summary", "--svg", file}, args...)...)
	if code != exitOK || stderr != "" {
		t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
	}
	_, summary, _ := strings.Cut(stdout, "\nsummary\n")
	for _, line := range strings.Split(strings.TrimSpace(summary), "\n")[1:] {
		fields := strings.Fields(line)
		most = append(most, fields[len(fields)-1])
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data, most
}

// stepPath matches a path of horizontal and vertical moves only.
var stepPath = regexp.MustCompile(`^M[0-9.]+,[0-9.]+( [HV][0-9.]+)*$`)

func TestSimulateSVG(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		limits     []string // limitLabel of each panel, in order
		most       []string // the figure each panel's header gives
		boundaries []string // the window boundaries marked, as offsets
		legend     []string
		golden     string
	}{
		{
			name:   "compare boundary",
			args:   boundaryArgs,
			limits: []string{"fixed_window", "sliding_window_log", "sliding_window_counter"},
			most: []string{"most admitted in any 1m window: 200, over the limit",
				"most admitted in any 1m window: 100",
				"most admitted in any 1m window: 109, over the limit"},
			boundaries: []string{"1m"},
			legend: []string{"offered: requests arriving in each 6s step", "admitted in each step (the grey above it was rejected)",
				"limit: 100 per 1m", "window boundary: a new 1m window starts", "window boundary",
				"fixed_window 100/1m0s", "sliding_window_log 100/1m0s", "sliding_window_counter 100/1m0s",
				"requests per 6s", "0s", "1m", "2m", "time from 2026-01-05T00:00:00Z"},
			golden: "boundary.svg",
		},
		{
			name:       "one token bucket",
			args:       []string{"--algorithm", "token_bucket", "--rate", "5", "--duration", "2s"},
			limits:     []string{"token_bucket"},
			most:       []string{"most admitted in any 1s window: 9"},
			boundaries: []string{}, // a bucket has no windows
			legend: []string{"offered: requests arriving in each 100ms step", "limit: 5 per 1s", "token_bucket 5/1s burst 5",
				"requests per 100ms", "0s", "1s", "2s"},
			golden: "token_bucket.svg",
		},
		{
			// 2026-01-05T00:00:00Z is 1767571200 s after the epoch, 3 s past
			// a multiple of 7 s: windows start 4 s, 11 s and 18 s in.
			name:       "windows not aligned to the start",
			args:       []string{"--compare", "gcra,fixed_window", "--rate", "5", "--period", "7s", "--cost", "2"},
			limits:     []string{"gcra", "fixed_window"},
			most:       []string{"most admitted in any 7s window: 8", "most admitted in any 7s window: 8, over the limit"},
			boundaries: []string{"4s", "11s", "18s"},
			legend:     []string{"offered: units arriving in each 700ms step", "units per 700ms", "window boundary: a new 7s window starts"},
		},
		{
			name:       "too many boundaries to draw",
			args:       []string{"--algorithm", "fixed_window", "--rate", "5", "--duration", "2m", "--step", "1s"},
			limits:     []string{"fixed_window"},
			most:       []string{"most admitted in any 1s window: 5"},
			boundaries: []string{},
			legend:     []string{"window boundaries every 1s: too many to draw"},
		},
		{
			name:       "concurrency has no rate line",
			args:       []string{"--algorithm", "concurrency", "--rate", "2"},
			limits:     []string{"concurrency"},
			most:       []string{"most admitted in any 1s window: 20"},
			boundaries: []string{},
			legend:     []string{"concurrency 2/1s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, summary := runSVG(t, tt.args...)
			doc := parseSVG(t, data)
			if bytes.Contains(data, []byte("<script")) {
				t.Error("the chart holds a script")
			}

			if got := attrs(doc.find("rect", "plot"), "data-limit"); !slices.Equal(got, tt.limits) {
				t.Errorf("panels: got %q, want one per limit, %q", got, tt.limits)
			}
			admitted := doc.find("path", "admitted")
			if got := attrs(admitted, "data-limit"); !slices.Equal(got, tt.limits) {
				t.Errorf("admitted lines: got %q, want one per limit, %q", got, tt.limits)
			}
			colors := attrs(admitted, "stroke")
			for i, e := range admitted {
				if d := e.attrs["d"]; !stepPath.MatchString(d) {
					t.Errorf("%s's admitted line %q: want a step line of H and V moves only", e.attrs["data-limit"], d)
				}
				if slices.Index(colors, colors[i]) != i {
					t.Errorf("%s's colour %s is another panel's too", e.attrs["data-limit"], colors[i])
				}
			}
			if n, want := len(doc.find("path", "offered")), len(tt.limits); n != want {
				t.Errorf("offered areas: got %d, want %d", n, want)
			}
			wantLimits := len(tt.limits)
			if tt.limits[0] == "concurrency" {
				wantLimits = 0
			}
			if n := len(doc.find("line", "limit")); n != wantLimits {
				t.Errorf("limit lines: got %d, want %d", n, wantLimits)
			}

			if n := len(doc.find("text", "most")); n != len(tt.most) {
				t.Errorf("panel figures: got %d, want %d", n, len(tt.most))
			}
			for i, want := range tt.most {
				if !slices.Contains(doc.texts(), want) {
					t.Errorf("no text %q in %q", want, doc.texts())
				}
				// The figure is the summary's.
				if i < len(summary) && !strings.Contains(want, ": "+summary[i]) {
					t.Errorf("panel %d says %q; the summary says %s", i, want, summary[i])
				}
			}
			if got := attrs(doc.find("line", "boundary"), "data-at"); !slices.Equal(got, tt.boundaries) {
				t.Errorf("window boundaries: got %q, want %q", got, tt.boundaries)
			}
			for _, want := range tt.legend {
				if !slices.Contains(doc.texts(), want) {
					t.Errorf("no text %q in %q", want, doc.texts())
				}
			}

			if tt.golden == "" {
				return
			}
			golden := filepath.Join("testdata", tt.golden)
			if *updateSVG {
				if err := os.WriteFile(golden, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestSimulateSVG -update to write it)", err)
			}
			if !bytes.Equal(data, want) {
				t.Errorf("chart differs from %s (go test -run TestSimulateSVG -update rewrites it); got\n%s", golden, data)
			}
		})
	}
}

// TestSVGBoundaryPlaces checks that the boundaries drawn are where the fixed
// window's count starts again: its state drops to 0 at each, and nowhere
// else.
func TestSVGBoundaryPlaces(t *testing.T) {
	for _, period := range []string{"1s", "7s", "90s"} {
		t.Run(period, func(t *testing.T) {
			sim, err := Parse([]string{"--algorithm", "fixed_window", "--rate", "3", "--period", period,
				"--traffic", "steady", "--rps", "1", "--step", "1s", "--duration", "6m"})
			if err != nil {
				t.Fatal(err)
			}
			o := simulate(sim.limits[0], sim.traffic, sim.clock, sim.hold)
			var resets []time.Duration
			for i, r := range o.rows {
				if i > 0 && r.before == 0 {
					resets = append(resets, r.at)
				}
			}
			got, tooMany := windowBoundaries(sim.clock, sim.limits[0].Period)
			if tooMany {
				// Too many to draw: the count still resets every period.
				if len(resets) <= svgMaxBoundaries {
					t.Errorf("%d resets: got too many to draw, want them drawn", len(resets))
				}
				return
			}
			if !slices.Equal(got, resets) {
				t.Errorf("boundaries: got %v, want the fixed window's resets %v", got, resets)
			}
		})
	}
}

func TestSVGNice(t *testing.T) {
	tests := []struct{ in, want int64 }{
		{0, 2}, {1, 2}, {5, 6}, {9, 10}, {10, 12}, {100, 120}, {109, 120}, {150, 200}, {1000, 1200}, {7_000_000, 8_000_000},
		{1 << 61, 1<<61 + 1<<61/10 + (1<<61+1<<61/10)%2},
	}
	for _, tt := range tests {
		got := svgNice(tt.in)
		if got != tt.want {
			t.Errorf("svgNice(%d): got %d, want %d", tt.in, got, tt.want)
		}
		if got%2 != 0 || got < tt.in {
			t.Errorf("svgNice(%d) = %d: want an even number at least the input", tt.in, got)
		}
	}
}

func TestSVGTick(t *testing.T) {
	tests := []struct{ d, want time.Duration }{
		{time.Second, 200 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond},
		{2 * time.Minute, 15 * time.Second},
		{3 * time.Hour, 30 * time.Minute},
		{90 * 24 * time.Hour, 14 * 24 * time.Hour},
		{maxDuration, 5 * 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := svgTick(tt.d); got != tt.want {
			t.Errorf("svgTick(%v): got %v, want %v", tt.d, got, tt.want)
		}
		if n := tt.d / svgTick(tt.d); n > svgTicks {
			t.Errorf("svgTick(%v) makes %d intervals, want at most %d", tt.d, n, svgTicks)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 36 * time.Hour: "36h", 1500 * time.Millisecond: "1.5s"} {
		if got := svgDuration(d); got != want {
			t.Errorf("svgDuration(%v): got %q, want %q", d, got, want)
		}
	}
}

func TestSimulateSVGErrors(t *testing.T) {
	base := []string{"simulate", "--algorithm", "gcra", "--rate", "5", "--summary"}
	code, stdout, stderr := runArgs(t, append(base, "--svg", "")...)
	if code != exitUsage || !strings.Contains(stderr, "--svg: want a file name") || stdout != "" {
		t.Errorf("empty --svg: got exit code %d, stdout %q, stderr %q; want %d, nothing and a --svg error", code, stdout, stderr, exitUsage)
	}
	missing := filepath.Join(t.TempDir(), "no", "chart.svg")
	code, _, stderr = runArgs(t, append(base, "--svg", missing)...)
	if code != exitFail || !strings.Contains(stderr, "--svg: open "+missing) {
		t.Errorf("--svg in a missing directory: got exit code %d, stderr %q; want %d and a --svg error", code, stderr, exitFail)
	}
}
