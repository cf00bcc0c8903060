package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/browsertest"
	"github.com/bouncerhq/bouncer/internal/redistest"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// liveConfig is the live page's test config: a rule per user (2 an
// hour), one per route, and a shadow rule on each user's writes. DOMAIN
// is replaced.
const liveConfig = `domain: DOMAIN
rules:
  - name: per_user
    match:
      - key: user
    limits:
      - {name: hourly, rate: 2, period: 1h, algorithm: fixed_window}
  - name: per_route
    match:
      - key: route
    limits:
      - {name: per_minute, rate: 1000, period: 1m}
  - name: bulk_writes
    shadow: true
    match:
      - key: method
        value: POST
      - key: user
    limits:
      - {name: per_minute, rate: 5, period: 1m}
`

// liveImage is where BOUNCER_UPDATE_IMAGES=1 writes the screenshot the
// README shows.
const liveImage = "../../docs/img/live.png"

// liveCase is one store the live page is rendered over.
type liveCase struct {
	store   string
	node    string // a Redis node the page must show, with its breaker closed
	reached bool   // the store answers (if not, every decision is degraded: the local fallback decides)
	steps   int    // samples of traffic in the history
	image   string // where to write the screenshot under BOUNCER_UPDATE_IMAGES, or ""
}

// TestLivePageInBrowser loads the admin live page of a running service in
// headless Chromium, checks what its script rendered from /live.json and
// that its charts were drawn with data (the script's marks in the DOM,
// and the series' colours in a screenshot), with the memory store, with
// Redis (whose node it shows), and with a Redis never reached (its node
// listed from the configuration, the degraded decisions counted).
func TestLivePageInBrowser(t *testing.T) {
	bin := browsertest.Chromium(t)
	steps := 24
	image := ""
	if os.Getenv("BOUNCER_UPDATE_IMAGES") == "1" {
		steps, image = 180, liveImage // the whole window: 15 minutes
	}
	t.Run("memory", func(t *testing.T) {
		testLivePage(t, bin, liveCase{store: "memory", reached: true, steps: steps, image: image})
	})
	t.Run("redis", func(t *testing.T) {
		addr := redistest.Addr(t)
		testLivePage(t, bin, liveCase{store: "redis://" + addr, node: addr, reached: true, steps: 6})
	})
	t.Run("redis never reached", func(t *testing.T) {
		addr := closedAddr(t)
		testLivePage(t, bin, liveCase{store: "redis://" + addr, node: addr, steps: 6})
	})
}

// Before any traffic, every table of the live page is empty: none shows
// its header, only the note that says why it is empty.
func TestLivePageEmptyTables(t *testing.T) {
	bin := browsertest.Chromium(t)
	ts := startTest(t, map[string]string{"native.yaml": strings.Replace(liveConfig, "DOMAIN", "api", 1)}, func(c *serveConfig) {
		c.liveByHand = true
	})
	dom, _ := render(t, bin, "http://"+ts.adminAddr+"/live")
	for _, body := range []string{"decisions", "most-denied", "keys", "history"} {
		want := `<thead hidden=""><tr>`
		i := strings.Index(dom, `<tbody id="`+body+`"></tbody>`)
		if i < 0 {
			t.Fatalf("no empty table %q in the rendered page:\n%s", body, dom)
		}
		if head := dom[strings.LastIndex(dom[:i], "<thead"):i]; !strings.HasPrefix(head, want) {
			t.Errorf("table %q: got header %q, want it hidden", body, head)
		}
	}
	if !strings.Contains(dom, "None of the keys seen last is denied.") {
		t.Errorf("the rendered page lacks the note of the empty keys table:\n%s", dom)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testLivePage serves lc.store and sends lc.steps rounds of checks, the
// history sampled after each, 5 s apart and ending now (the test takes
// the samples: the service's own sampler is off). The checks include a
// hostile key, users over their limit and a shadow rule's. It then
// renders the live page.
func testLivePage(t *testing.T, bin string, lc liveCase) {
	domain := "api"
	if lc.node != "" {
		domain = fmt.Sprintf("live-%d-%d", os.Getpid(), time.Now().UnixNano()) // Redis outlives the test
	}
	good := strings.Replace(liveConfig, "DOMAIN", domain, 1)
	ts := startTest(t, map[string]string{"native.yaml": good}, func(c *serveConfig) {
		c.store, c.liveByHand = lc.store, true
		if !lc.reached {
			c.onStoreError = "local"
		}
		if lc.image != "" {
			c.started = time.Now().Add(-time.Duration(lc.steps+40) * 5 * time.Second) // up for longer than the history shows
		}
	})
	if lc.reached && lc.node != "" {
		redisConnected(t, ts)
	}
	const hostile = "<script>alert(1)</script>"
	for _, user := range []string{"alice", hostile, hostile, hostile} {
		ts.check(t, request(domain, desc("user="+user)))
	}
	if got := ts.check(t, request(domain, desc("user="+hostile))).GetOverallCode(); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("the hostile user's fourth check: got %v, want OVER_LIMIT", got)
	}

	// Traffic that rises and falls, a sample after each round: users
	// within their limits, and now and then a scraper over its own, its
	// writes over the shadow rule's. The real clock hardly moves, so the
	// limits count the whole run as one moment.
	end := time.Now()
	ts.live.Sample(end.Add(time.Duration(-lc.steps) * 5 * time.Second)) // the counters the first point starts from
	for i := range lc.steps {
		users := 3 + int(math.Round(2.5+2.5*math.Sin(float64(i)/9)))
		for j := range users {
			user := fmt.Sprintf("user=u%d-%d", i, j)
			ts.check(t, request(domain, desc(user), desc(fmt.Sprintf("route=/r%d", j%5))))
			if j%2 == 0 {
				ts.check(t, request(domain, desc("method=POST", user)))
			}
		}
		if math.Sin(float64(i)/7) > 0.4 {
			scraper := fmt.Sprintf("user=scraper-%d", i/20)
			for k := range 4 {
				ts.check(t, request(domain, desc(scraper), desc("route=/search")))
				if k%2 == 0 {
					ts.check(t, request(domain, desc("method=POST", scraper)))
				}
			}
		}
		if i == lc.steps-1 { // seen last, so among the keys the page peeks at
			for range 6 {
				ts.check(t, request(domain, desc("method=POST", "user=batch-job")))
			}
		}
		ts.live.Sample(end.Add(time.Duration(i-lc.steps+1) * 5 * time.Second))
	}

	// A broken edit, rejected: the page lists it with its problem.
	writeConfig(t, ts.dir, "native.yaml", "domain: [\n")
	if err := ts.reloader.Reload(); err == nil {
		t.Fatal("reloading a broken config: got no error")
	}
	writeConfig(t, ts.dir, "native.yaml", good)

	dom, shot := render(t, bin, "http://"+ts.adminAddr+"/live")
	if lc.image != "" {
		if err := os.MkdirAll(filepath.Dir(lc.image), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lc.image, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", lc.image)
	}

	version := ts.engine.Config().Version
	want := []string{"per_user", `id="version" class="key">` + version + "<",
		`<td class="rejected">config rejected; the old one keeps serving</td><td class="key">` + version + `</td><td class="problems">` + ts.dir + "/native.yaml:",
		`id="command">bouncer serve<`, "grpc " + ts.grpcAddr, "admin " + ts.adminAddr,
		`bulk_writes (method_POST.user)<span class="tag">shadow</span>`, // its chart and its decisions
	}
	switch {
	case lc.node == "":
		want = append(want, `id="store">memory<`)
	case lc.reached:
		want = append(want, `id="store">redis `+lc.node+`<`, "Connected.", `<td class="key">`+lc.node+`</td><td class="closed">closed</td>`,
			`<p id="hybrid-decisions">Decisions: `) // the hybrid limiter in front of Redis counts them
	default:
		want = append(want, "Never connected yet", `<td class="key">`+lc.node+`</td><td class="connecting">never connected (connecting)</td>`,
			`<td class="degraded_allowed">degraded, allowed</td>`, `<td class="degraded_denied">degraded, denied</td>`,
			`id="degraded" class="banner">Deciding without the shared store`)
	}
	want = append(want,
		`<tbody id="most-denied"><tr>`, // the hostile user, denied at least twice, among the most denied
		"&lt;script&gt;alert(1)&lt;/script&gt;")
	if lc.reached {
		want = append(want, `<span class="tag">shadow: reported, not denied</span>`)
	}
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("the rendered page lacks %q:\n%s", w, dom)
		}
	}
	if strings.Contains(dom, hostile) {
		t.Errorf("the rendered page holds the hostile key as an element:\n%s", dom)
	}
	for _, first := range []string{"…", "–/s", `<td class="n">–</td>`} { // every fact and rate known on first paint
		if strings.Contains(dom, first) {
			t.Errorf("the rendered page shows %q:\n%s", first, dom)
		}
	}
	m := deniedTotal.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the rendered page has no denied count:\n%s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Errorf("denied count: got %s, want at least 2 (the hostile user's last two checks, degraded or not)", m[1])
	}
	checkCharts(t, dom, shot, lc.steps, lc.reached)
}

// deniedTotal reads the count the live page shows as denied.
var deniedTotal = regexp.MustCompile(`id="denied-total" class="over_limit">(\d+)<`)

// render loads url in headless Chromium, with a window large enough for
// the charts and the tables under them, and returns the DOM its script
// left and a screenshot (PNG) of the window.
func render(t *testing.T, bin, url string) (dom string, shot []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	png := filepath.Join(dir, "live.png")
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1280,1500", "--lang=en-GB",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--virtual-time-budget=5000", "--dump-dom", "--screenshot="+png, url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	shot, err = os.ReadFile(png)
	if err != nil {
		t.Fatalf("%s wrote no screenshot: %v\n%s", bin, err, stderr.String())
	}
	return string(out), shot
}

// chartMark matches a chart as the page's script marks it once uPlot drew
// it: the points drawn, their results, and the plot area on the page.
var chartMark = regexp.MustCompile(`<div class="chart all" data-points="(\d+)" data-results="([a-z_,]+)" data-plot="(\d+),(\d+),(\d+),(\d+)">`)

// checkCharts checks that the chart of all rules was drawn with a point
// per step of each result, and that the screenshot shows the allowed and
// (when the store answers) denied series in its plot area.
func checkCharts(t *testing.T, dom string, shot []byte, steps int, reached bool) {
	t.Helper()
	m := chartMark.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the rendered page has no drawn chart of all rules:\n%s", dom)
	}
	results := strings.Split(m[2], ",")
	if points, _ := strconv.Atoi(m[1]); points != steps*len(results) {
		t.Errorf("chart of all rules: got %s points of %v, want %d (one per sample and result)", m[1], results, steps*len(results))
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	var rect [4]int
	for i := range rect {
		rect[i], _ = strconv.Atoi(m[3+i])
	}
	plot := image.Rect(rect[0], rect[1], rect[0]+rect[2], rect[1]+rect[3])
	if !plot.In(img.Bounds()) || plot.Dx() < 100 || plot.Dy() < 50 {
		t.Fatalf("the chart's plot area %v is not a fair part of the screenshot %v", plot, img.Bounds())
	}
	// The page's colours for the results (live.js).
	colours := map[string][3]int{"ok": {0x2f, 0x9e, 0x44}, "over_limit": {0xe0, 0x31, 0x31},
		"degraded_allowed": {0xf0, 0x8c, 0x00}, "degraded_denied": {0xa6, 0x1e, 0x4d}}
	want := []string{"ok", "over_limit"}
	if !reached {
		want = []string{"degraded_allowed", "degraded_denied"}
	}
	for _, result := range want {
		if !strings.Contains(","+m[2]+",", ","+result+",") {
			t.Errorf("chart of all rules: results %v lack %s", results, result)
		}
		if n := countColour(img, plot, colours[result]); n < 20 {
			t.Errorf("chart of all rules: %d pixels of %s's colour in the plot area %v, want at least 20 (its line)", n, result, plot)
		}
	}
}

// countColour counts the pixels of r within 24 of c in each channel.
func countColour(img image.Image, r image.Rectangle, c [3]int) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if abs(int(cr>>8)-c[0]) <= 24 && abs(int(cg>>8)-c[1]) <= 24 && abs(int(cb>>8)-c[2]) <= 24 {
				n++
			}
		}
	}
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
