//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// bouncer serve on a Redis that speaks only TLS, given only the CA that
// signs the server's certificate: a check through the JSON API is
// decided, and counted, in that Redis. With
// --store-tls-insecure-skip-verify instead, it connects too, and warns.
func TestServeRedisTLS(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
			t.Fatal("redis-server is not on PATH; run scripts/redis-up.sh (it installs Redis)")
		}
		t.Skip("redis-server is not on PATH")
	}
	srv, err := redistest.StartTLS(t.TempDir(), redistest.TLSOptions{AuthClients: "no"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	domain := fmt.Sprintf("tls-%d-%d", os.Getpid(), time.Now().UnixNano())
	dir := t.TempDir()
	cfg := "domain: " + domain + "\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(dir, "tls.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, tls := range [][]string{{"--store-tls-ca", srv.Certs.CAFile}, {"--store-tls-insecure-skip-verify=true"}} {
		httpAddr, admin := freeAddr(t), freeAddr(t)
		p := startServe(t, append([]string{"--config", dir, "--store", "rediss://" + srv.Addrs[0], "--grpc-addr", freeAddr(t),
			"--http-addr", httpAddr, "--admin-addr", admin}, tls...)...)
		if sumMetric(t, admin, "bouncer_redis_connected") != 1 {
			t.Fatalf("%s: not connected to Redis once serving:\n%s", tls[0], p.output())
		}
		body := `{"domain": "` + domain + `", "hits_addend": 10, "descriptors": [{"entries": [{"key": "a", "value": "x"}]}]}`
		resp, err := http.Post("http://"+httpAddr+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Statuses []struct {
				LimitRemaining int  `json:"limit_remaining"`
				Degraded       bool `json:"degraded"`
			} `json:"statuses"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if want := 90 - 10*i; err != nil || len(got.Statuses) != 1 || got.Statuses[0].LimitRemaining != want || got.Statuses[0].Degraded {
			t.Fatalf("%s: check of 10: got %+v, %v; want %d remaining, decided in Redis:\n%s", tls[0], got, err, want, p.output())
		}
		warned := strings.Contains(p.output(), "NOT verified")
		if insecure := i == 1; warned != insecure {
			t.Errorf("%s: warned of unverified certificates: %v, want %v", tls[0], warned, insecure)
		}
	}
	keys, err := srv.CLI(srv.Addrs[0], "--scan", "--pattern", "bouncer:*")
	if err != nil || keys == "" {
		t.Errorf("the TLS Redis holds no bouncer keys after the checks: %q, %v", keys, err)
	}
}
