package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's transcoding tour, as a person runs it: the example's gRPC
// Greeter and bouncer gateway with examples/transcode/gateway.yaml, each
// a process, on free ports instead of the config's. curl gets JSON from
// the gRPC side, a 429 with Retry-After when the gRPC side says
// RESOURCE_EXHAUSTED, and one when the caller's limit says so.
func TestTranscodeExample(t *testing.T) {
	const dir = "../../examples/transcode"
	grpcAddr, addr, admin := freeAddr(t), freeAddr(t), freeAddr(t)

	// The config as it is, but for its three addresses; its rules and
	// descriptor set beside it.
	tmp := t.TempDir()
	for _, f := range []string{"rules.yaml", "greeter.pb"} {
		if err := os.WriteFile(filepath.Join(tmp, f), []byte(readFileT(t, filepath.Join(dir, f))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := readFileT(t, filepath.Join(dir, "gateway.yaml"))
	for from, to := range map[string]string{"127.0.0.1:9094": grpcAddr, "127.0.0.1:8094": addr, "127.0.0.1:8095": admin} {
		if !strings.Contains(cfg, from) {
			t.Fatalf("gateway.yaml does not name %s", from)
		}
		cfg = strings.ReplaceAll(cfg, from, to)
	}
	file := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// go run ./examples/transcode &
	bin := filepath.Join(tmp, "transcode")
	if out, err := exec.Command("go", "build", "-o", bin, dir).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	greeter := exec.Command(bin, "-addr", grpcAddr)
	logs := &lockedBuffer{}
	greeter.Stdout, greeter.Stderr = logs, logs
	if err := greeter.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error // greeter.Wait's, once exited is closed
	exited := make(chan struct{})
	go func() { waitErr = greeter.Wait(); close(exited) }()
	t.Cleanup(func() {
		greeter.Process.Kill()
		<-exited
	})
	until(t, "the Greeter to listen", func() bool {
		select {
		case <-exited:
			t.Fatalf("the Greeter exited:\n%s", logs)
		default:
		}
		c, err := net.DialTimeout("tcp", grpcAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// go run ./cmd/bouncer gateway --config examples/transcode/gateway.yaml &
	gw := startGatewayProc(t, file, addr, admin, "--watch=false")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	type answer struct {
		code int
		h    http.Header
		body map[string]any
	}
	do := func(method, path, key, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, gw.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		a := answer{code: resp.StatusCode, h: resp.Header}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: Content-Type %q, want application/json (%s)", method, path, ct, b)
		}
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("%s %s: %d %q: %v, want a JSON object", method, path, resp.StatusCode, b, err)
		}
		return a
	}

	// until curl -sf -X POST localhost:8094/grpc.health.v1.Health/Check; do sleep 0.2; done
	until(t, "the health route to say SERVING", func() bool {
		a := do(http.MethodPost, "/grpc.health.v1.Health/Check", "", "")
		return a.code == http.StatusOK && a.body["status"] == "SERVING"
	})

	if a := do(http.MethodGet, "/v1/hello/world", "", ""); a.code != http.StatusUnauthorized || a.body["error"] != "unauthenticated" {
		t.Errorf("without a key: %d %v, want 401 unauthenticated", a.code, a.body)
	}
	// alice's first two of three.
	a := do(http.MethodGet, "/v1/hello/world", "demo-alice-key", "")
	if a.code != http.StatusOK || a.body["message"] != "Hello, world!" || a.h.Get("RateLimit-Policy") == "" {
		t.Errorf("alice's hello: %d %v %v, want 200 Hello, world! with RateLimit-Policy", a.code, a.body, a.h)
	}
	a = do(http.MethodPost, "/v1/notes", "demo-alice-key", `{"text":"buy milk"}`)
	if a.code != http.StatusOK || a.body["id"] != 1.0 || a.body["text"] != "buy milk" || a.body["author"] != "alice" {
		t.Errorf("alice's note: %d %v, want 200 {id: 1, text: buy milk, author: alice}", a.code, a.body)
	}

	// The gRPC side's RESOURCE_EXHAUSTED, with its RetryInfo's 30s.
	a = do(http.MethodGet, "/v1/hello/busy", "demo-bob-key", "")
	if a.code != http.StatusTooManyRequests || a.h.Get("Retry-After") != "30" || a.body["error"] != "resource_exhausted" {
		t.Errorf("bob's busy hello: %d Retry-After %q %v, want 429 Retry-After 30 resource_exhausted", a.code, a.h.Get("Retry-After"), a.body)
	}

	// alice has spent two of her three: of four more in a row, the first
	// is 200 and the rest 429s (a token comes back every 20s: a slow
	// machine may see a second 200); the next is the limit's 429.
	var codes []int
	for range 4 {
		codes = append(codes, do(http.MethodGet, "/v1/hello/world", "demo-alice-key", "").code)
	}
	if codes[0] != http.StatusOK || !slices.Contains(codes, http.StatusTooManyRequests) {
		t.Errorf("alice's four in a row: %v, want 200 then 429s", codes)
	}
	a = do(http.MethodGet, "/v1/hello/world", "demo-alice-key", "")
	retry, err := strconv.Atoi(a.h.Get("Retry-After"))
	if a.code != http.StatusTooManyRequests || err != nil || retry < 1 || retry > 20 ||
		a.body["error"] != "rate_limited" || a.body["retry_after"] != float64(retry) {
		t.Errorf("alice over her limit: %d Retry-After %q %v, want 429, Retry-After 1 to 20 and rate_limited with the same retry_after",
			a.code, a.h.Get("Retry-After"), a.body)
	}
	gw.terminate(t, 15*time.Second)

	// The Greeter stops on SIGTERM, and exits 0.
	if err := greeter.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("the Greeter after SIGTERM: %v, want exit 0:\n%s", waitErr, logs)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("the Greeter still runs 15s after SIGTERM:\n%s", logs)
	}
}
