package simulate

import (
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// times returns the offsets of traffic.
func times(traffic []arrival) []time.Duration {
	out := make([]time.Duration, len(traffic))
	for i, a := range traffic {
		out[i] = a.at
	}
	return out
}

func TestSteadyTraffic(t *testing.T) {
	tests := []struct {
		rps      string
		duration time.Duration
		want     []time.Duration
	}{
		{"3", time.Second, []time.Duration{0, 333333333, 666666666}},
		{"0.5", 5 * time.Second, []time.Duration{0, 2 * time.Second, 4 * time.Second}},
		{"2.5", 2 * time.Second, []time.Duration{0, 400 * ms, 800 * ms, 1200 * ms, 1600 * ms}},
		// The last request lands exactly on the end: it is not sent.
		{"2", 2 * time.Second, []time.Duration{0, 500 * ms, time.Second, 1500 * ms}},
		{"1", 1, []time.Duration{0}},
		{"0.001", 10 * time.Second, []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.rps+"/"+tt.duration.String(), func(t *testing.T) {
			rps, _ := new(big.Rat).SetString(tt.rps)
			got, err := steadyTraffic(rps, tt.duration, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(times(got), tt.want) {
				t.Errorf("got %v, want %v", times(got), tt.want)
			}
		})
	}
}

func TestSteadyTrafficCount(t *testing.T) {
	rps := big.NewRat(1000, 1)
	got, err := steadyTraffic(rps, 10*time.Second, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10000 {
		t.Fatalf("got %d requests, want 10000", len(got))
	}
	if last := got[len(got)-1]; last.at != 9999*ms || last.cost != 3 {
		t.Errorf("last request: got %+v, want at 9.999s costing 3", last)
	}
	if _, err := steadyTraffic(big.NewRat(1_000_001, 1), time.Second, 1); err == nil {
		t.Errorf("1000001 requests: got no error, want one")
	}
}

func TestBurstTraffic(t *testing.T) {
	got, err := burstTraffic(3, time.Second, 2500*ms, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	want := []time.Duration{0, 0, 0, s, s, s, 2 * s, 2 * s, 2 * s}
	if !slices.Equal(times(got), want) {
		t.Errorf("got %v, want %v", times(got), want)
	}
	// A burst exactly at the end is not sent.
	got, _ = burstTraffic(2, time.Second, 2*time.Second, 1)
	if len(got) != 4 {
		t.Errorf("2 every 1s for 2s: got %d requests, want 4", len(got))
	}
	if _, err := burstTraffic(1000, time.Millisecond, time.Hour, 1); err == nil {
		t.Errorf("3.6e9 requests: got no error, want one")
	}
}

func TestBoundaryAttack(t *testing.T) {
	tests := []struct {
		name  string
		start int64
		want  []time.Duration
	}{
		{
			name:  "aligned start",
			start: simStart.UnixNano(),
			want:  []time.Duration{900 * ms, 925 * ms, 950 * ms, 975 * ms, 1000 * ms, 1025 * ms, 1050 * ms, 1075 * ms},
		},
		{
			// The first boundary is at Unix 1s, 500ms after the start,
			// with room for the first half.
			name:  "start mid-window",
			start: int64(500 * ms),
			want:  []time.Duration{400 * ms, 425 * ms, 450 * ms, 475 * ms, 500 * ms, 525 * ms, 550 * ms, 575 * ms},
		},
		{
			// Unix 950ms leaves no room before the boundary at 1s: the
			// attack takes the one at 2s.
			name:  "start just before a boundary",
			start: int64(950 * ms),
			want:  []time.Duration{950 * ms, 975 * ms, 1000 * ms, 1025 * ms, 1050 * ms, 1075 * ms, 1100 * ms, 1125 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := boundaryAttack(tt.start, time.Second, 4, 3*time.Second, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(times(got), tt.want) {
				t.Errorf("got %v, want %v", times(got), tt.want)
			}
		})
	}
	if _, err := boundaryAttack(simStart.UnixNano(), time.Second, 4, time.Second, 1); err == nil || !strings.Contains(err.Error(), "--duration") {
		t.Errorf("duration too short: got %v, want an error naming --duration", err)
	}
}

func TestReadTraffic(t *testing.T) {
	const file = `# time cost
150ms
0.05        # plain seconds
1.5 4
1m 0

   2s 2   # trailing comment
0
`
	got, err := readTraffic("t.txt", strings.NewReader(file), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := []arrival{
		{0, 1}, {50 * ms, 1}, {150 * ms, 1}, {1500 * ms, 4}, {2 * time.Second, 2}, {time.Minute, 0},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReadTrafficErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"not a time", "1s\nsoon\n", `t.txt:2: time "soon" is neither`},
		{"negative duration", "# x\n-1s\n", `t.txt:2: time "-1s" is negative`},
		{"negative seconds", "-0.5\n", `t.txt:1: time "-0.5" is negative`},
		{"not finite", "inf\n", `t.txt:1: time "inf"`},
		{"NaN", "NaN\n", `t.txt:1: time "NaN"`},
		{"fraction", "1/2\n", `t.txt:1: time "1/2"`},
		{"huge seconds", "1e400\n", `t.txt:1: time "1e400" is out of range`},
		{"long time", "0." + strings.Repeat("0", 50) + "1\n", `t.txt:1: time "0.00000000"... is longer than 40 characters`},
		{"past the end", "1s\n\n10s\n", "t.txt:3: time 10s is not before 5s"},
		{"bad cost", "1s many\n", `t.txt:1: cost "many"`},
		{"negative cost", "1s -1\n", `t.txt:1: cost "-1"`},
		{"cost too big", "1s 9999999999999\n", `t.txt:1: cost "9999999999999"`},
		{"three fields", "1s 1 1\n", "t.txt:1: want a time and an optional cost, got 3 fields"},
		{"line too long", "1s\n" + strings.Repeat("1", 70000) + "\n", "t.txt:2: bufio.Scanner: token too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readTraffic("t.txt", strings.NewReader(tt.file), 1, 5*time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMaxInWindow(t *testing.T) {
	s := time.Second
	tests := []struct {
		name     string
		admitted []arrival
		want     int64
	}{
		{"none", nil, 0},
		{"one", []arrival{{0, 3}}, 3},
		{"one period apart", []arrival{{0, 1}, {s, 1}}, 1},
		{"just inside", []arrival{{0, 1}, {s - 1, 1}}, 2},
		{"boundary pair", []arrival{{900 * ms, 10}, {1000 * ms, 10}, {1850 * ms, 5}}, 25},
		{"later cluster wins", []arrival{{0, 1}, {2 * s, 2}, {2*s + 1, 2}, {3 * s, 1}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxInWindow(tt.admitted, s); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
