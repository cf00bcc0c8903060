package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/rules"
)

// A WebSocket holds a concurrency lease for as long as it is open.
func TestWebSocketHoldsItsLease(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	}))
	defer up.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte("domain: ws\nrules:\n  - name: sockets\n    match: [{key: route}]\n    limits: [{name: one, algorithm: concurrency, rate: 1, period: 1h}]\n"), 0o600)
	file := filepath.Join(dir, "g.yaml")
	os.WriteFile(file, []byte("rules: rules.yaml\nlisteners: [{addr: x}]\nroutes:\n  - {name: chat, path_prefix: /chat/, upstreams: ["+up.URL+"], limits: {domain: ws, descriptors: [[route]]}}\n"), 0o600)
	cfg, err := gateway.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.LoadOptions{AllowConcurrency: true}.Load(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newGateway(t, cfg, rc, nil))
	defer srv.Close()

	// open upgrades a connection through the gateway and returns it with
	// the answer's status.
	open := func() (net.Conn, *bufio.Reader, int) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, "GET /chat/room HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			io.Copy(io.Discard, resp.Body)
		}
		return conn, br, resp.StatusCode
	}
	first, br, code := open()
	if code != 101 {
		t.Fatalf("the first WebSocket: %d, want 101", code)
	}
	fmt.Fprint(first, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the echo through the tunnel: %q %v", buf, err)
	}
	second, _, code := open()
	second.Close()
	if code != 429 {
		t.Fatalf("a second WebSocket while the first is open: %d, want 429", code)
	}
	first.Close()
	// The lease goes back when the tunnel closes; ask until it has.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _, code := open()
		c.Close()
		if code == 101 {
			break
		}
		if code != 429 || time.Now().After(deadline) {
			t.Fatalf("after the first WebSocket closed: %d, want 101 once its lease is back", code)
		}
	}
}
