package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

const holdRules = `domain: hold
rules:
  - name: inflight
    match: [{key: route, value: slow}]
    limits: [{name: one_at_a_time, algorithm: concurrency, rate: 1, period: 1m}]
  - name: kind
    match: [{key: route, value: flaky}]
    refund_on_5xx: true
    limits: [{name: hourly, algorithm: fixed_window, rate: 2, period: 1h}]
  - name: shaped
    match: [{key: route, value: shaped}]
    limits: [{name: queue, algorithm: leaky_bucket, shape: true, rate: 1, period: 2s, burst: 3}]
`

// holdGateway is a gateway with the three routes of holdRules in front of
// upstream, counting on a store with the fake clock.
func holdGateway(t *testing.T, upstream string, clock *storetest.Clock) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(holdHandler(t, upstream, clock))
	t.Cleanup(srv.Close)
	return srv
}

// holdHandler is holdGateway's handler.
func holdHandler(t *testing.T, upstream string, clock *storetest.Clock) http.Handler {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(holdRules), 0o600); err != nil {
		t.Fatal(err)
	}
	var routes strings.Builder
	for _, name := range []string{"slow", "flaky", "shaped"} {
		routes.WriteString("  - {name: " + name + ", path_prefix: /" + name + "/, upstreams: [" + upstream + "], limits: {domain: hold, descriptors: [[route]]}}\n")
	}
	file := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(file, []byte("rules: rules.yaml\nlisteners: [{addr: x}]\nroutes:\n"+routes.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.LoadOptions{AllowConcurrency: true}.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	return newGateway(t, cfg, rc, clock.Now)
}

func statusOf(t *testing.T, ctx context.Context, url string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// A concurrency rule holds its lease while the upstream answers, and
// gives it back when the answer ends or the client goes away.
func TestLeasesLiveWithTheRequest(t *testing.T) {
	entered, release := make(chan string, 4), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		if r.URL.Path != "/slow/quick" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer up.Close()
	srv := holdGateway(t, up.URL, storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	ctx := context.Background()

	done := make(chan int)
	go func() { c, _ := statusOf(t, ctx, srv.URL+"/slow/held"); done <- c }()
	<-entered
	if c, _ := statusOf(t, ctx, srv.URL+"/slow/quick"); c != 429 {
		t.Fatalf("a second request while one is in flight: %d, want 429", c)
	}
	release <- struct{}{}
	if c := <-done; c != 200 {
		t.Fatalf("the held request: %d, want 200", c)
	}
	if c, _ := statusOf(t, ctx, srv.URL+"/slow/quick"); c != 200 {
		t.Fatalf("after it ended: %d, want 200 (its lease given back)", c)
	}
	<-entered

	// A client that goes away gives its lease back.
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan int)
	go func() { c, _ := statusOf(t, cctx, srv.URL+"/slow/abandoned"); gone <- c }()
	<-entered
	cancel()
	<-gone
	// The release follows the cancellation through the server: wait for
	// it by asking until the lease is free (each ask is a real request,
	// refused until then).
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _ := statusOf(t, ctx, srv.URL+"/slow/quick")
		if c == 200 {
			<-entered
			break
		}
		if c != 429 || time.Now().After(deadline) {
			t.Fatalf("after the client went away: %d, want 200 once its lease is given back", c)
		}
	}
	close(release)
}

// A rule with refund_on_5xx gives the units of a request the upstream
// failed back; a success keeps them.
func TestRefundOn5xx(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer up.Close()
	srv := holdGateway(t, up.URL, storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	ctx := context.Background()
	// Three failures (five in a row would eject the upstream).
	for i := range 3 {
		if c, _ := statusOf(t, ctx, srv.URL+"/flaky/fail"); c != 502 {
			t.Fatalf("failing request %d: %d, want 502 (the failures charged nothing)", i, c)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if c, _ := statusOf(t, ctx, srv.URL+"/flaky/ok"); c != want {
			t.Fatalf("request %d after the failures: %d, want %d", i, c, want)
		}
	}
}

// A client that goes away mid-answer is no upstream failure: a rule
// with refund_on_5xx keeps its units (before, the proxy's abort counted
// as a failure, and leaving early got them back).
func TestLeavingEarlyIsNoFailure(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/big") {
			return
		}
		w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: the client leaves first
	}))
	defer up.Close()
	h := holdHandler(t, up.URL, storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/flaky/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // mid-body: the transport closes the connection
	<-done
	for i, want := range []int{200, 429} {
		if c, _ := statusOf(t, context.Background(), srv.URL+"/flaky/ok"); c != want {
			t.Fatalf("request %d after the one that left: %d, want %d (it kept its unit of 2)", i, c, want)
		}
		<-done
	}
}

// A shaping rule refuses a request that would wait past the gateway's
// bound, with a Retry-After, and gives its place back.
func TestShapingPastTheBoundIsRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	srv := holdGateway(t, up.URL, clock)
	ctx := context.Background()
	if c, _ := statusOf(t, ctx, srv.URL+"/shaped/a"); c != 200 {
		t.Fatalf("the first request: %d, want 200 at once", c)
	}
	for i := range 3 {
		c, h := statusOf(t, ctx, srv.URL+"/shaped/b")
		if c != 429 || h.Get("Retry-After") != "1" {
			t.Fatalf("request %d, due 2 s later: %d Retry-After %q, want 429 and 1 (2 s past the 1 s bound)", i, c, h.Get("Retry-After"))
		}
	}
	// The refused requests took no place in the queue: 2 s on, one is
	// due at once again.
	clock.Advance(2 * time.Second)
	if c, _ := statusOf(t, ctx, srv.URL+"/shaped/c"); c != 200 {
		t.Fatalf("2 s later: %d, want 200", c)
	}
}
