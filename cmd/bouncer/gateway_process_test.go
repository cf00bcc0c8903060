package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/httpretry"
	"github.com/bouncerhq/bouncer/internal/redistest"
)

// gatewayProc is a `bouncer gateway` child process: this test binary run
// as bouncer (TestMain), with its output in logs.
type gatewayProc struct {
	cmd         *exec.Cmd
	logs        *lockedBuffer
	done        chan struct{} // closed when the process has exited
	err         error         // Wait's, once done is closed
	base, admin string        // http://listener, http://admin
}

// startGatewayProc runs `bouncer gateway --config file args...` and
// returns once its admin's /readyz says ready. addr and admin are the
// addresses file gives the listener and the admin. The process is killed
// when t ends if it is still running.
func startGatewayProc(t *testing.T, file, addr, admin string, args ...string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{logs: &lockedBuffer{}, done: make(chan struct{}), base: "http://" + addr, admin: "http://" + admin}
	p.cmd = exec.Command(os.Args[0], append([]string{"gateway", "--config", file}, args...)...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	c := &http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	until(t, "bouncer gateway to be ready", func() bool {
		select {
		case <-p.done:
			t.Fatalf("bouncer gateway exited before it was ready (%v):\n%s", p.err, p.logs)
		default:
		}
		resp, err := c.Get(p.admin + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"ready"`)
	})
	return p
}

// terminate sends SIGTERM, waits up to within for the process to exit,
// and fails t unless it exits 0. It returns how long the exit took.
func (p *gatewayProc) terminate(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t, start, within)
}

// wait waits for the exit of a process told to stop at start, up to
// within from then, and fails t unless it exits 0.
func (p *gatewayProc) wait(t *testing.T, start time.Time, within time.Duration) time.Duration {
	t.Helper()
	timer := time.NewTimer(time.Until(start.Add(within)))
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		t.Fatalf("bouncer gateway still running %v after SIGTERM:\n%s", within, p.logs)
	}
	took := time.Since(start)
	if p.err != nil {
		t.Fatalf("bouncer gateway after SIGTERM: %v, want exit 0:\n%s", p.err, p.logs)
	}
	return took
}

// gatewayConfig writes a gateway config with one plain listener at addr,
// the admin at admin, and routes (YAML list items) to dir/name, and
// returns its path.
func gatewayConfig(t *testing.T, dir, name, rulesFile, addr, admin, routes string) string {
	t.Helper()
	var b strings.Builder
	if rulesFile != "" {
		fmt.Fprintf(&b, "rules: %s\n", rulesFile)
	}
	fmt.Fprintf(&b, "listeners: [{addr: %q}]\nadmin: %q\nroutes:\n%s", addr, admin, routes)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Three gateway processes on one Redis share one global limit: of 300
// requests spread over them, exactly the limit's 50 reach the upstream,
// and every other one is a 429 with Retry-After.
func TestGatewayProcessesShareOneLimit(t *testing.T) {
	redisAddr := redistest.Addr(t)
	var reached atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, "up")
	}))
	defer upstream.Close()

	// A store key is the domain and the descriptor's entries, not the
	// rule: the domain is new on every run, so that the shared Redis
	// holds no count of it yet. A token bucket of 50 an hour admits
	// exactly 50 in a run shorter than its 72s refill, with no window
	// boundary to fall on.
	const limit, perGateway, callers, requests = 50, 32, 3 * 32, 300
	run := fmt.Sprintf("gwshare-%d-%d", os.Getpid(), time.Now().UnixNano())
	dir := t.TempDir()
	rulesYAML := fmt.Sprintf(`domain: %s
rules:
  - name: %s
    match: [{key: generic_key, value: global}]
    on_store_error: deny
    limits: [{name: hourly, rate: %d, burst: %d, period: 1h, algorithm: token_bucket}]
`, run, run, limit, limit)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rulesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	routes := fmt.Sprintf(`  - name: shared
    path_prefix: /app/
    upstreams: [%s]
    limits: {domain: %s, descriptors: [[generic_key=global]]}
`, upstream.URL, run)
	// The store runs at its defaults. A Redis call slower than its
	// deadline is decided without Redis (degraded), here by the rule's
	// on_store_error: deny, so that no instance admits on its own: a
	// loaded machine may refuse a few more, never admit one too many.
	gws := make([]*gatewayProc, 3)
	for i := range gws {
		addr, admin := freeAddr(t), freeAddr(t)
		file := gatewayConfig(t, dir, fmt.Sprintf("gateway-%d.yaml", i), "rules.yaml", addr, admin, routes)
		gws[i] = startGatewayProc(t, file, addr, admin, "--store", "redis://"+redisAddr, "--watch=false")
	}

	tr := &http.Transport{MaxIdleConnsPerHost: perGateway}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	type answer struct {
		code                 int
		retryAfter, degraded string
		err                  error
	}
	answers := make([]answer, requests)
	next := make(chan int)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := range next {
				resp, err := client.Get(gws[i%len(gws)].base + "/app/x")
				if err != nil {
					answers[i].err = err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answers[i] = answer{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Bouncer-Degraded"), nil}
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()

	admitted, denied, degraded := 0, 0, 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("request %d: %v", i, a.err)
		case a.code == http.StatusOK:
			admitted++
		case a.code == http.StatusTooManyRequests:
			denied++
			if a.retryAfter == "" {
				t.Errorf("request %d: 429 without Retry-After", i)
			}
		default:
			t.Errorf("request %d: got %d, want 200 or 429", i, a.code)
		}
		if a.degraded != "" {
			degraded++
			if a.code == http.StatusOK {
				t.Errorf("request %d: admitted without Redis, want refused (on_store_error: deny)", i)
			}
		}
	}
	t.Logf("%d requests over %d gateways: %d admitted, %d denied (%d of them without Redis), %d reached the upstream",
		requests, len(gws), admitted, denied, degraded, reached.Load())
	// One shared limit: never more than it, and every unit it did not
	// admit refused by a degraded decision.
	if admitted > limit || admitted+degraded < limit || reached.Load() != int64(admitted) {
		t.Errorf("admitted %d (%d degraded refusals), upstream reached %d times; want %d admitted but for degraded refusals, and each reaching the upstream",
			admitted, degraded, reached.Load(), limit)
	}
	if admitted+denied != requests {
		t.Errorf("answered %d, want %d", admitted+denied, requests)
	}

	// The client may hold connections it dialed and never used; a
	// server's Shutdown waits 5s before it counts such a connection idle.
	tr.CloseIdleConnections()
	sigterm := time.Now()
	for _, g := range gws {
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range gws {
		took := g.wait(t, sigterm, 15*time.Second)
		t.Logf("exited 0 %v after SIGTERM", took.Round(time.Millisecond))
	}
}

// SIGTERM while 20 requests wait on the upstream: the gateway stops
// accepting, every request in flight still gets its 200, and the process
// exits 0 within its shutdown timeout.
func TestGatewaySIGTERMDropsNothing(t *testing.T) {
	const n, shutdownTimeout = 20, 10 * time.Second
	entered := make(chan struct{}, n)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "up")
	}))
	defer upstream.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	dir := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	file := gatewayConfig(t, dir, "gateway.yaml", "", addr, admin, fmt.Sprintf("  - {name: slow, path_prefix: /slow/, upstreams: [%s]}\n", upstream.URL))
	gw := startGatewayProc(t, file, addr, admin, "--watch=false", "--shutdown-timeout", shutdownTimeout.String())

	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	type answer struct {
		code int
		body string
		err  error
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			resp, err := client.Get(gw.base + "/slow/x")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(b), err}
		}()
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i := range n {
		select {
		case <-entered:
		case <-timeout.C:
			t.Fatalf("the upstream has %d of the %d requests after 10s:\n%s", i, n, gw.logs)
		}
	}

	sigterm := time.Now()
	if err := gw.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	until(t, "the gateway to start draining", func() bool { return strings.Contains(gw.logs.String(), "shutting down") })

	// A new connection now is refused, or reset before any answer, or
	// answered; it is never left hanging.
	outcome := newConnection(t, addr)
	t.Logf("a new connection while draining: %s", outcome)
	// The admin listener stops with the others: a readiness probe now is
	// refused, or answered 503 draining; never ready.
	if resp, err := client.Get(gw.admin + "/readyz"); err != nil {
		t.Logf("/readyz while draining: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("/readyz while draining: %d %s", resp.StatusCode, b)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "draining") {
			t.Errorf("/readyz while draining: %d %s, want 503 draining or no answer", resp.StatusCode, b)
		}
	}

	close(release)
	released = true
	for range n {
		a := <-answers
		if a.err != nil || a.code != http.StatusOK || a.body != "up" {
			t.Errorf("a request in flight at SIGTERM: %d %q %v, want 200 \"up\"", a.code, a.body, a.err)
		}
	}
	took := gw.wait(t, sigterm, shutdownTimeout)
	t.Logf("exited 0 %v after SIGTERM", took.Round(time.Millisecond))
	if !strings.Contains(gw.logs.String(), "stopped") {
		t.Errorf("log does not say stopped:\n%s", gw.logs)
	}
}

// newConnection dials addr and sends one request, and says what became of
// it; it fails t if the connection hangs.
func newConnection(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "refused"
		}
		t.Fatalf("dialing the draining gateway: %v, want it refused or answered", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET /slow/new HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n"); err != nil {
		return "reset before the request was sent: " + err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("a new connection to the draining gateway hangs: %v", err)
	case err != nil:
		return "closed without an answer: " + err.Error()
	}
	resp.Body.Close()
	return "answered " + resp.Status
}

// An httpretry client through the gateway: a burst of 40 GETs at a route
// limited to 10 a second with bursts of 10. With the default retry budget
// the client retries what the budget allows and hands the rest their 429
// at once; with a budget for the burst every request ends 200. Either way
// the upstream never sees more than the bucket admits, and the gateway
// answers no more attempts than the budget allows.
func TestHTTPRetryAgainstTheGateway(t *testing.T) {
	const requests, rate, deadline = 40, 10, 10 * time.Second
	var mu sync.Mutex
	arrivals := map[string][]time.Time{} // by route
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		mu.Lock()
		arrivals[route] = append(arrivals[route], now)
		mu.Unlock()
		io.WriteString(w, "up")
	}))
	defer upstream.Close()

	dir := t.TempDir()
	rulesYAML := fmt.Sprintf(`domain: burst
rules:
  - name: per_route
    match: [{key: route}]
    limits: [{name: per_second, rate: %d, burst: %d, period: 1s, algorithm: token_bucket}]
`, rate, rate)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rulesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		budget  float64 // the Budget's Tokens; 0 for the default, 10
		retries int     // MaxRetries; 0 for the default, 3
		allOK   bool    // every request ends 200
	}{
		{"default", 0, 0, false},
		{"sized", 100, 10, true},
	}
	var routes strings.Builder
	for _, tt := range tests {
		fmt.Fprintf(&routes, "  - {name: %s, path_prefix: /%s/, upstreams: [%s], limits: {domain: burst, descriptors: [[route]]}}\n", tt.name, tt.name, upstream.URL)
	}
	addr, admin := freeAddr(t), freeAddr(t)
	file := gatewayConfig(t, dir, "gateway.yaml", "rules.yaml", addr, admin, routes.String())
	gw := startGatewayProc(t, file, addr, admin, "--watch=false")

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &http.Transport{MaxIdleConnsPerHost: requests}
			defer base.CloseIdleConnections()
			rt := &httpretry.Transport{Base: base, MaxRetries: tt.retries, Budget: httpretry.Budget{Tokens: tt.budget}}
			client := &http.Client{Transport: rt}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()

			type answer struct {
				code       int
				retryAfter string
				err        error
			}
			answers := make([]answer, requests)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.base+"/"+tt.name+"/x", nil)
					if err != nil {
						answers[i].err = err
						return
					}
					<-start
					resp, err := client.Do(req)
					if err != nil {
						answers[i].err = err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					answers[i] = answer{resp.StatusCode, resp.Header.Get("Retry-After"), nil}
				})
			}
			t0 := time.Now()
			close(start)
			wg.Wait()
			elapsed := time.Since(t0)

			ok, denied := 0, 0
			for i, a := range answers {
				switch {
				case a.err != nil:
					t.Errorf("request %d: %v, want an answer within the deadline", i, a.err)
				case a.code == http.StatusOK:
					ok++
				case a.code == http.StatusTooManyRequests && !tt.allOK:
					denied++
					if a.retryAfter == "" {
						t.Errorf("request %d: 429 without Retry-After", i)
					}
				default:
					t.Errorf("request %d: got %d, want 200", i, a.code)
				}
			}
			if elapsed >= deadline {
				t.Errorf("the burst took %v, want less than the deadline, %v", elapsed, deadline)
			}

			// The bucket was full (its burst, rate) at t0 and refills rate
			// a second: by any instant t, at most rate + rate·(t−t0)
			// requests passed it, plus one for rounding.
			mu.Lock()
			seen := slices.Clone(arrivals[tt.name])
			mu.Unlock()
			slices.SortFunc(seen, func(a, b time.Time) int { return a.Compare(b) })
			for k, at := range seen {
				if allowed := rate + int(float64(rate)*at.Sub(t0).Seconds()) + 1; k+1 > allowed {
					t.Errorf("the upstream had %d requests %v after the burst began, want at most %d", k+1, at.Sub(t0).Round(time.Millisecond), allowed)
					break
				}
			}
			if len(seen) != ok {
				t.Errorf("the upstream saw %d requests, want %d (the 200s)", len(seen), ok)
			}

			// Every retry takes a token of the budget, every success
			// gives back 0.1.
			tokens := tt.budget
			if tokens == 0 {
				tokens = 10
			}
			attempts, rejected := gatewayAttempts(t, gw.admin, tt.name)
			if most := requests + int(tokens+0.1*float64(ok)); attempts > most {
				t.Errorf("the gateway answered %d attempts, want at most %d (%d requests and the retry budget)", attempts, most, requests)
			}
			if attempts != ok+rejected {
				t.Errorf("the gateway answered %d attempts: %d 200s and %d 429s, want no other code", attempts, ok, rejected)
			}
			t.Logf("%d requests in %v: %d ended 200, %d ended 429; the gateway answered %d attempts (%d of them 429), the upstream saw %d",
				requests, elapsed.Round(time.Millisecond), ok, denied, attempts, rejected, len(seen))
		})
	}
	gw.terminate(t, 15*time.Second)
}

// gatewayAttempts reads the gateway's bouncer_gateway_requests_total for
// route: all codes, and 429.
func gatewayAttempts(t *testing.T, admin, route string) (all, tooMany int) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^bouncer_gateway_requests_total\{code="(\d+)",route="` + regexp.QuoteMeta(route) + `"\} (\S+)$`)
	for _, m := range line.FindAllStringSubmatch(string(b), -1) {
		n, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("metric %q: %v", m[0], err)
		}
		all += int(n)
		if m[1] == "429" {
			tooMany += int(n)
		}
	}
	return all, tooMany
}

// A config made broken while the process serves, with --watch, is
// rejected naming its file and line, and the old routes keep serving; the
// good config that follows adds its route.
func TestGatewayRejectsABadConfigWhileServing(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "up:"+r.URL.Path)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	old := fmt.Sprintf("  - name: old\n    path_prefix: /old/\n    upstreams: [%s]\n", upstream.URL)
	write := func(routes string) { gatewayConfig(t, dir, "gateway.yaml", "", addr, admin, routes) }
	file := gatewayConfig(t, dir, "gateway.yaml", "", addr, admin, old)
	gw := startGatewayProc(t, file, addr, admin, "--watch=true")

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(gw.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/old/x"); code != 200 || body != "up:/old/x" {
		t.Fatalf("GET /old/x: %d %q, want 200 \"up:/old/x\"", code, body)
	}

	// Line 7 is the new route's, which has no path_prefix. The watch
	// may start after the readiness: the process says when it has.
	until(t, "the watch to start", func() bool { return strings.Contains(gw.logs.String(), "watching the config for changes") })
	broken := old + fmt.Sprintf("  - name: new\n    upstreams: [%s]\n", upstream.URL)
	write(broken)
	until(t, "the broken config to be rejected", func() bool { return strings.Contains(gw.logs.String(), "config rejected") })
	if logs := gw.logs.String(); !strings.Contains(logs, "gateway.yaml line=7 ") || !strings.Contains(logs, "path_prefix") {
		t.Errorf("logs: %s\nwant the rejection naming gateway.yaml:7 and path_prefix", logs)
	}
	if code, body := get("/old/x"); code != 200 || body != "up:/old/x" {
		t.Errorf("GET /old/x after the rejection: %d %q, want 200 (the old config)", code, body)
	}
	if code, _ := get("/new/x"); code != http.StatusNotFound {
		t.Errorf("GET /new/x after the rejection: %d, want 404", code)
	}

	good := old + fmt.Sprintf("  - name: new\n    path_prefix: /new/\n    upstreams: [%s]\n", upstream.URL)
	write(good)
	until(t, "the good config's route to answer", func() bool {
		code, _ := get("/new/x")
		return code == http.StatusOK
	})
	if code, body := get("/old/x"); code != 200 || body != "up:/old/x" {
		t.Errorf("GET /old/x after the reload: %d %q, want 200", code, body)
	}
	if !strings.Contains(gw.logs.String(), "config reloaded") {
		t.Errorf("logs: %s\nwant config reloaded", gw.logs)
	}
	gw.terminate(t, 15*time.Second)
}
