package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// bouncer serve, as a Redis user that docs/redis.md's ACL line without
// +function|load describes, logs at start what is missing and how to
// grant it, and /readyz names it among its degraded reasons.
func TestServeNamesMissingPermission(t *testing.T) {
	requireRedisServer(t)
	page, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile("(?m)^ACL SETUSER bouncer .*$").Find(page)
	if line == nil {
		t.Fatal("docs/redis.md has no ACL SETUSER bouncer line")
	}
	r := startRedisProc(t, freePort(t))
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	args := append(strings.Fields(strings.ReplaceAll(string(line), "PASSWORD", "pw"))[2:], "-function|load")
	if err := admin.Do(context.Background(), admin.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "down.yaml"), []byte(holdDownConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	adminAddr := freeAddr(t)
	p := startServe(t, "--config", dir, "--store", fmt.Sprintf("redis://bouncer:pw@%s", r.addr()),
		"--grpc-addr", freeAddr(t), "--http-addr", "", "--admin-addr", adminAddr)
	const want = "the Redis user cannot FUNCTION LOAD (NOPERM): grant +function|load, see docs/redis.md#managed-redis"
	if out := p.output(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, want) {
		t.Errorf("bouncer serve's log:\n%s\nwant an ERROR line with %q", out, want)
	}
	code, body := readyz(t, adminAddr)
	if reasons := fmt.Sprint(body["reasons"]); body["status"] != "degraded" || !strings.Contains(reasons, want) {
		t.Errorf("/readyz: %d %v; want degraded, with %q among the reasons", code, body, want)
	}
}
