package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	adminapi "github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/rules"
)

const gatewayRules = `domain: gw
rules:
  - name: global
    match: [{key: generic_key, value: global}]
    limits: [{name: hourly, rate: 5, burst: 5, period: 1h, algorithm: token_bucket}] # no window to turn during the test
`

const gatewayFile = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
admin: 127.0.0.1:0
routes:
  - name: ROUTE
    path_prefix: /app/
    upstreams: [UPSTREAM]
    limits: {domain: gw, descriptors: [[generic_key=global]]}
`

// lockedBuffer is a log sink the test reads while the gateway writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `bouncer gateway` as a process runs it, but for the signals: its
// listeners and admin, its limits, a reload that is rejected while the
// old config keeps serving, one that is taken, and a shutdown that lets
// the requests in flight finish.
func TestGatewayCommand(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/app/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "up:"+r.URL.Path)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rules.yaml", gatewayRules)
	write("gateway.yaml", strings.NewReplacer("ROUTE", "first", "UPSTREAM", upstream.URL).Replace(gatewayFile))

	var c serveConfig
	fs := gatewayFlags(&c, io.Discard)
	if err := fs.Parse([]string{"--config", file, "--watch=false"}); err != nil {
		t.Fatal(err)
	}
	opts, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	s, err := startGateway(context.Background(), c, opts, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base, admin := "http://"+s.addrs[0], "http://"+s.addrs[1]
	get := func(url string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for i := range 2 {
		if code, body, h := get(base + "/app/x"); code != 200 || body != "up:/app/x" || h.Get("RateLimit") == "" {
			t.Fatalf("request %d: %d %q %v, want the upstream's answer with RateLimit", i, code, body, h)
		}
	}
	if code, body, _ := get(base + "/elsewhere"); code != 404 || !strings.Contains(body, `"no_route"`) {
		t.Fatalf("unknown route: %d %s", code, body)
	}

	// A config with an error is rejected, naming file and line; the old
	// one keeps serving, counts included.
	write("gateway.yaml", strings.NewReplacer("ROUTE", "first", "UPSTREAM", upstream.URL, "path_prefix: /app/", "path_prefix: app").Replace(gatewayFile))
	s.reload()
	if !strings.Contains(logs.String(), "config rejected") || !strings.Contains(logs.String(), `gateway.yaml","line":5,`) {
		t.Fatalf("logs after a bad config: %s\nwant the rejection with file and line", logs.String())
	}
	if code, _, h := get(base + "/app/x"); code != 200 || h.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("after the rejected reload: %d, remaining %q, want 200 and 2 (the old config, its counts)", code, h.Get("X-RateLimit-Remaining"))
	}
	// A good one is taken.
	write("gateway.yaml", strings.NewReplacer("ROUTE", "second", "UPSTREAM", upstream.URL).Replace(gatewayFile))
	s.reload()
	if !strings.Contains(logs.String(), "config reloaded") {
		t.Fatalf("logs: %s\nwant config reloaded", logs.String())
	}

	if code, body, _ := get(admin + "/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body, _ := get(admin + "/readyz"); code != 200 || !strings.Contains(body, "ready") {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, body, _ := get(admin + "/metrics")
	if code != 200 || !strings.Contains(body, `bouncer_gateway_requests_total{code="200",route="first"} 3`) ||
		!strings.Contains(body, `bouncer_gateway_requests_total{code="404",route=""} 1`) {
		t.Fatalf("/metrics: %d, want the requests by route and code:\n%s", code, body)
	}
	// The reloads are the app's, as serve's are: counted, and remembered
	// for the live page, each problem with its file and line.
	for _, result := range []string{"failure", "success"} {
		if got, _ := sample(body, "bouncer_config_reloads_total", "result="+result); got != 1 {
			t.Errorf("bouncer_config_reloads_total{result=%s}: got %v, want 1", result, got)
		}
	}
	h := s.reloader.History()
	if len(h) != 2 || h[0].Outcome != rules.Rejected || h[1].Outcome != rules.Reloaded ||
		len(h[0].Problems) == 0 || !strings.HasSuffix(h[0].Problems[0].File, "gateway.yaml") || h[0].Problems[0].Line != 5 {
		t.Errorf("reload history: got %+v, want a rejection at gateway.yaml:5, then a reload", h)
	}
	// snake_case names, no zero time for an upstream not ejected.
	want := `{"upstreams":[{"route":"second","upstream":"` + upstream.URL + `","healthy":true}]}` + "\n"
	if code, body, _ := get(admin + "/v1/upstreams"); code != 200 || body != want {
		t.Errorf("/v1/upstreams: %d %s, want 200 %s", code, body, want)
	}
	// The index lists the admin API's endpoints and the gateway's own.
	code, body, _ = get(admin + "/")
	var index struct{ Endpoints []adminapi.Endpoint }
	if err := json.Unmarshal([]byte(body), &index); code != 200 || err != nil {
		t.Fatalf("GET /: %d %s (%v), want the endpoints", code, body, err)
	}
	for _, path := range []string{"/", "/healthz", "/metrics", "/v1/rules", "/v1/keys", "/live", "/v1/upstreams"} {
		if !slices.ContainsFunc(index.Endpoints, func(e adminapi.Endpoint) bool { return e.Path == path && e.Description != "" }) {
			t.Errorf("GET /: got %+v, want %s listed", index.Endpoints, path)
		}
	}
	// The live page names the gateway, its store and its listeners.
	if code, body, _ := get(admin + "/live.json"); code != 200 || !strings.Contains(body,
		`"service":{"command":"gateway","store":"memory","listeners":[{"name":"http","addr":"`+s.addrs[0]+`"},{"name":"admin","addr":"`+s.addrs[1]+`"}]`) {
		t.Errorf("/live.json: %d %s, want the gateway's command, store and listeners", code, body)
	}

	// Shutdown lets the requests in flight finish.
	const n = 2
	codes := make(chan int, n)
	for range n {
		go func() {
			resp, err := http.Get(base + "/app/slow")
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range n {
		<-entered
	}
	done := make(chan struct{})
	go func() {
		s.shutdown()
		close(done)
	}()
	close(release)
	<-done
	for range n {
		if code := <-codes; code != 200 {
			t.Fatalf("a request in flight at shutdown: %d, want 200", code)
		}
	}
}

// A TLS listener terminates TLS with the files of its config and speaks
// HTTP/2 to a client that offers it.
func TestGatewayTLSListener(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") }))
	defer upstream.Close()
	certs, err := filepath.Abs("../../gateway/tlsreload/testdata")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	cfg := "listeners:\n  - addr: 127.0.0.1:0\n    tls: {cert_file: " + filepath.Join(certs, "server.pem") + ", key_file: " + filepath.Join(certs, "server.key") + "}\n" +
		"routes:\n  - {name: r, path_prefix: /, upstreams: [" + upstream.URL + "]}\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var c serveConfig
	if err := gatewayFlags(&c, io.Discard).Parse([]string{"--config", file, "--watch=false"}); err != nil {
		t.Fatal(err)
	}
	opts, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startGateway(context.Background(), c, opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown()
	ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + s.addrs[0] + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "up" || resp.ProtoMajor != 2 {
		t.Fatalf("over TLS: %d %q %s, want 200 up over HTTP/2", resp.StatusCode, b, resp.Proto)
	}
}

// A shutdown lets an open WebSocket go on until it closes (within the
// shutdown timeout), while no new connection is taken.
func TestGatewayShutdownDrainsWebSockets(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte("listeners: [{addr: \"127.0.0.1:0\"}]\nroutes:\n  - {name: ws, path_prefix: /, upstreams: ["+upstream.URL+"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var c serveConfig
	if err := gatewayFlags(&c, io.Discard).Parse([]string{"--config", file, "--watch=false"}); err != nil {
		t.Fatal(err)
	}
	opts, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startGateway(context.Background(), c, opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	done := make(chan struct{})
	go func() {
		s.shutdown()
		close(done)
	}()
	// Once the listener refuses new connections, the shutdown is under
	// way; the tunnel still carries data both ways.
	for {
		c, err := net.Dial("tcp", s.addrs[0])
		if err != nil {
			break
		}
		c.Close()
	}
	for _, msg := range []string{"still", "open"} {
		io.WriteString(conn, msg)
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("the tunnel during the shutdown: %q %v, want the echo of %q", buf, err, msg)
		}
	}
	select {
	case <-done:
		t.Fatal("the shutdown ended while a WebSocket was open")
	default:
	}
	conn.Close()
	<-done
}

// A gateway's reload reads its rules and its own file together: rules
// its routes cannot use are rejected with the file that refers to them,
// and the engine keeps its rules; a rules file other than the one it
// started with is rejected, not served.
func TestGatewayReloadRules(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") }))
	defer upstream.Close()
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gw := strings.NewReplacer("ROUTE", "r", "UPSTREAM", upstream.URL).Replace(gatewayFile)
	write("rules.yaml", gatewayRules)
	write("gateway.yaml", gw)
	var c serveConfig
	if err := gatewayFlags(&c, io.Discard).Parse([]string{"--config", filepath.Join(dir, "gateway.yaml"), "--watch=false"}); err != nil {
		t.Fatal(err)
	}
	o, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startGateway(context.Background(), c, o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.shutdown()
	started := s.engine.Config().Version
	for _, step := range []struct {
		name, rules, gateway string
		want                 rules.ReloadOutcome
		reason               string // in the rejection's problem
		served               bool   // the new rules are served
	}{
		{"rules without the routes' domain", strings.Replace(gatewayRules, "domain: gw", "domain: other", 1), gw, rules.Rejected, `"gw"`, false},
		{"another rules file", gatewayRules, strings.Replace(gw, "rules: rules.yaml", "rules: other.yaml", 1), rules.Rejected, "restart", false},
		{"new limits", strings.Replace(gatewayRules, "rate: 5, burst: 5", "rate: 7, burst: 7", 1), gw, rules.Reloaded, "", true},
	} {
		write("rules.yaml", step.rules)
		write("gateway.yaml", step.gateway)
		s.reload()
		h := s.reloader.History()
		last := h[len(h)-1]
		if last.Outcome != step.want {
			t.Fatalf("%s: got %q %v, want %q", step.name, last.Outcome, last.Problems, step.want)
		}
		if step.reason != "" && (len(last.Problems) == 0 || !strings.Contains(last.Problems[0].Reason, step.reason)) {
			t.Errorf("%s: problems %v, want one saying %s", step.name, last.Problems, step.reason)
		}
		if served := s.engine.Config().Version != started; served != step.served {
			t.Errorf("%s: the new rules served: %v, want %v", step.name, served, step.served)
		}
	}
}
