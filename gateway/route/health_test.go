package route_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// change is one call of Options.OnUpstream.
type change struct {
	route, upstream string
	healthy         bool
}

// waitFor waits for want on changes, failing the test on another change
// or after a long while.
func waitFor(t *testing.T, changes <-chan change, want change) {
	t.Helper()
	select {
	case got := <-changes:
		if got != want {
			t.Fatalf("got health change %+v, want %+v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no health change after 10s, want %+v", want)
	}
}

// sequence makes n requests to url and returns the upstreams that
// answered them.
func sequence(t *testing.T, client *http.Client, url string, n int) string {
	t.Helper()
	var names []string
	for range n {
		status, _, body := get(t, client, url)
		if status != http.StatusOK {
			names = append(names, http.StatusText(status))
			continue
		}
		names = append(names, decodeSeen(t, body).Upstream)
	}
	return strings.Join(names, " ")
}

func TestActiveHealth(t *testing.T) {
	var sick atomic.Bool
	var failedChecks atomic.Int64
	a := newEcho(t, "a")
	b := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/base/healthz" {
			if r.URL.RawQuery != "deep=1" {
				t.Errorf("health check got query %q, want deep=1", r.URL.RawQuery)
			}
			if sick.Load() {
				failedChecks.Add(1)
				http.Error(w, "sick", http.StatusInternalServerError)
			}
			return
		}
		w.Write([]byte(`{"Upstream":"b"}`))
	}))
	changes := make(chan change, 16)
	logs := &logBuffer{}
	table := newTable(t, []route.Route{{
		Name: "checked", PathPrefix: "/", Upstreams: []string{a.URL, b + "/base"},
		Health: &route.HealthCheck{Path: "/healthz?deep=1", Interval: 5 * time.Millisecond, Timeout: time.Second, Healthy: 2, Unhealthy: 3},
	}}, route.Options{
		Logger:     logs.logger(),
		OnUpstream: func(r, u string, healthy bool) { changes <- change{r, u, healthy} },
	})
	base, client := gateway(t, table, false)
	bURL := b + "/base"

	if got := sequence(t, client, base+"/", 4); got != "a b a b" {
		t.Errorf("healthy: got %q, want both upstreams", got)
	}
	sick.Store(true)
	waitFor(t, changes, change{"checked", bURL, false})
	if n := failedChecks.Load(); n < 3 {
		t.Errorf("unhealthy after %d failed checks, want 3", n)
	}
	if h := table.Health(); h[1].Healthy || !h[0].Healthy {
		t.Errorf("got %+v, want b unhealthy, a healthy", h)
	}
	if got := sequence(t, client, base+"/", 4); got != "a a a a" {
		t.Errorf("b unhealthy: got %q, want a only", got)
	}
	sick.Store(false)
	waitFor(t, changes, change{"checked", bURL, true})
	if h := table.Health(); !h[1].Healthy {
		t.Errorf("got %+v, want b healthy again", h)
	}
	if got := sequence(t, client, base+"/", 4); !strings.Contains(got, "b") {
		t.Errorf("b healthy again: got %q, want b to get traffic", got)
	}
	table.Close()
	for _, want := range []string{"upstream unhealthy", "upstream healthy"} {
		if len(lines(logs.String(), want)) != 1 {
			t.Errorf("got logs %q, want one line %q", logs.String(), want)
		}
	}
	select {
	case c := <-changes:
		t.Errorf("got health change %+v, want none more", c)
	default:
	}
}

func TestEjection(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	a := newEcho(t, "a")
	b := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		w.Write([]byte(`{"Upstream":"b"}`))
	}))
	clock := newClock()
	logs := &logBuffer{}
	table := newTable(t, []route.Route{
		{Name: "pair", PathPrefix: "/", Eject: route.Eject{Failures: 2, Duration: 30 * time.Second}, Upstreams: []string{a.URL, b}},
		{Name: "alone", PathPrefix: "/alone", Eject: route.Eject{Failures: 1}, Upstreams: []string{b}},
	}, route.Options{Now: clock.Now, Logger: logs.logger()})
	base, client := gateway(t, table, false)
	ejectedUntil := func(route, upstream string) time.Time {
		t.Helper()
		for _, h := range table.Health() {
			if h.Route == route && h.Upstream == upstream {
				return h.EjectedUntil
			}
		}
		t.Fatalf("no upstream %s of route %q in Health", upstream, route)
		return time.Time{}
	}

	steps := []struct {
		advance time.Duration
		fix     bool // b answers 200 from now on
		want    string
		until   time.Duration // b's ejection, after the start; 0: not ejected
	}{
		{want: "a Internal Server Error a", until: 0}, // one failure: still in
		{want: "Internal Server Error a a a", until: 30 * time.Second},
		{advance: 29 * time.Second, want: "a a", until: 30 * time.Second},
		{advance: time.Second, want: "Internal Server Error a a", until: 60 * time.Second}, // the trial fails
		{advance: 30 * time.Second, fix: true, want: "b a b a", until: 0},                  // the trial succeeds
	}
	start := clock.Now()
	for i, s := range steps {
		clock.Advance(s.advance)
		if s.fix {
			failing.Store(false)
		}
		if got := sequence(t, client, base+"/", len(strings.Fields(strings.ReplaceAll(s.want, "Internal Server Error", "500")))); got != s.want {
			t.Errorf("step %d: got %q, want %q", i, got, s.want)
		}
		want := time.Time{}
		if s.until != 0 {
			want = start.Add(s.until)
		}
		if got := ejectedUntil("pair", b); !got.Equal(want) {
			t.Errorf("step %d: b ejected until %v, want %v", i, got, want)
		}
	}
	if n := len(lines(logs.String(), "upstream ejected")); n != 2 {
		t.Errorf("got %d lines of ejection in %q, want 2", n, logs.String())
	}
	if n := len(lines(logs.String(), "back from ejection")); n != 1 {
		t.Errorf("got %d lines of return in %q, want 1", n, logs.String())
	}

	t.Run("no healthy upstream", func(t *testing.T) {
		failing.Store(true)
		if status, _, _ := get(t, client, base+"/alone"); status != http.StatusInternalServerError {
			t.Fatalf("got status %d, want the upstream's 500", status)
		}
		status, h, body := get(t, client, base+"/alone")
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
			t.Errorf("got status %d, Retry-After %q, want 503 and 1", status, h.Get("Retry-After"))
		}
		if e := decodeError(t, body); e.Error != "no_healthy_upstream" || !strings.Contains(e.Message, `route "alone"`) {
			t.Errorf("got %+v, want no_healthy_upstream naming the route", e)
		}
	})
}
