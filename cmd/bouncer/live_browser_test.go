package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/redistest"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// browser returns the path of a Chromium binary, skipping t if there is
// none, or failing it under BOUNCER_REQUIRE_BROWSER (make test sets it
// after scripts/chromium-up.sh installed one).
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BOUNCER_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium or chromium-browser on PATH, and BOUNCER_REQUIRE_BROWSER is set (scripts/chromium-up.sh installs one)")
	}
	t.Skip("no chromium or chromium-browser on PATH (scripts/chromium-up.sh installs one)")
	return ""
}

// deniedTotal reads the count the live page shows as denied.
var deniedTotal = regexp.MustCompile(`id="denied-total">(\d+)<`)

// TestLivePageInBrowser loads the admin live page of a running service in
// headless Chromium and checks what its script rendered from /live.json,
// with the memory store and with Redis (whose node it shows).
func TestLivePageInBrowser(t *testing.T) {
	bin := browser(t)
	t.Run("memory", func(t *testing.T) { testLivePage(t, bin, "memory", "") })
	t.Run("redis", func(t *testing.T) {
		addr := redistest.Addr(t)
		testLivePage(t, bin, "redis://"+addr, addr)
	})
}

// testLivePage serves store, sends checks of which two are denied, one
// for a hostile key, and renders the live page; node, if not "", is the
// Redis node the page must show with its breaker closed.
func testLivePage(t *testing.T, bin, store, node string) {
	domain := fmt.Sprintf("live-%d-%d", os.Getpid(), time.Now().UnixNano()) // Redis outlives the test
	good := strings.Replace(nativeConfig, "domain: native", "domain: "+domain, 1)
	ts := startTest(t, map[string]string{"native.yaml": good},
		func(c *serveConfig) { c.store = store })
	if node != "" {
		redisConnected(t, ts)
	}
	const hostile = "<script>alert(1)</script>"
	for _, user := range []string{"alice", hostile, hostile, hostile} {
		ts.check(t, request(domain, desc("user="+user)))
	}
	if got := ts.check(t, request(domain, desc("user="+hostile))).GetOverallCode(); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("the hostile user's fourth check: got %v, want OVER_LIMIT", got)
	}

	// A broken edit, rejected: the page lists it with its problem.
	writeConfig(t, ts.dir, "native.yaml", "domain: [\n")
	if err := ts.reloader.Reload(); err == nil {
		t.Fatal("reloading a broken config: got no error")
	}
	writeConfig(t, ts.dir, "native.yaml", good)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "http://"+ts.adminAddr+"/live")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	dom := string(out)

	version := ts.engine.Config().Version
	want := []string{"per_user", `id="version">` + version + "<", "&lt;script&gt;alert(1)&lt;/script&gt;",
		`<tbody id="most-denied"><tr>`, // the hostile user, denied at least twice, heads the most denied
		`<td class="rejected">config rejected; the old one keeps serving</td><td class="key">` + version + `</td><td class="problems">` + ts.dir + "/native.yaml:"}
	if node != "" {
		want = append(want, "Connected.", `<td class="key">`+node+`</td><td class="closed">closed</td>`,
			`<p id="hybrid-decisions">Decisions: `) // the hybrid limiter in front of Redis counts them
	}
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("the rendered page lacks %q:\n%s", w, dom)
		}
	}
	if strings.Contains(dom, hostile) {
		t.Errorf("the rendered page holds the hostile key as an element:\n%s", dom)
	}
	m := deniedTotal.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the rendered page has no denied count:\n%s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Errorf("denied count: got %s, want at least 2 (the hostile user's last two checks)", m[1])
	}
}
