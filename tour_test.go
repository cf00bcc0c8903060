package bouncer_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A tourStep is what a person does with one shell block of README.md's
// tour, and what they should see.
type tourStep struct {
	// block is a line that identifies the README block (its first line).
	block string
	// ready, if not empty, makes the step a program left running in a
	// terminal of its own: the tour goes on once every address accepts
	// connections (the person waits for its "serving" line), and the
	// program is stopped with Ctrl-C (SIGINT to its group) at the end.
	ready []string
	// want are patterns the block's output must match, with the number of
	// times each must (0: at least once).
	want []match
	// skip, if it returns a reason, leaves the step out (with the reason
	// logged): what it needs is not here.
	skip func() string
	// restart, on a ready step, first stops the terminal an earlier step
	// of the same block started, as Ctrl-C would, and waits for it to
	// exit: the person restarts the program.
	restart bool
}

type match struct {
	re    string
	times int
}

func once(re string) match { return match{re: re, times: 1} }
func some(re string) match { return match{re: re} }

// tourSteps are the tour's shell blocks, in README order.
var tourSteps = []tourStep{
	{block: "make run", ready: []string{"127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:6070"}},
	{block: "for i in 1 2 3 4; do\n  curl -si localhost:8080/v1/check", want: []match{
		{`HTTP/1.1 200 OK`, 3}, once(`HTTP/1.1 429 Too Many Requests`), once(`(?i)Retry-After: 1\r?\n`),
		{`"overall_code":"OK"`, 3}, once(`"overall_code":"OVER_LIMIT"`),
		{`(?i)RateLimit-Policy: "per_second";q=3;w=2\r?\n`, 4},
	}},
	{block: "go install github.com/fullstorydev/grpcurl/cmd/grpcurl@", want: []match{once(`"overallCode": "OK"`)}},
	{block: "curl -s localhost:6070/                   # every admin endpoint", want: []match{
		some(`"path":"/live"`), some(`"domain":"api"`), some(`alice`), some(`(?m)^bouncer_decisions_total\{.*rule="per_user"`),
	}},
	{block: "go run ./cmd/bouncer serve --config examples/serve/envoy", ready: []string{"127.0.0.1:8090", "127.0.0.1:8091", "127.0.0.1:6071"}},
	{block: "curl -s localhost:8090/v1/check", want: []match{once(`"overall_code":"OK"`), once(`"limit_remaining":59`)}},
	{block: "go run ./cmd/bouncer simulate --compare fixed_window,sliding_window_log,sliding_window_counter", want: []match{
		some(`fixed_window`), some(`sliding_window_log`), some(`sliding_window_counter`),
	}},
	{block: "bash scripts/redis-up.sh --standalone", skip: defaultRedisMissing, want: []match{
		{`instance [12]: allowed \(redis\)`, 5}, {`instance [12]: denied \(redis\)`, 2},
		some(`no redis  : allowed \(local\)`), once(`admitted: 100 \(never more than the limit: true\)`),
		once(`every second after the first within 1\.1 × the limit: true`), once(`degraded decisions: 0`),
	}},
	{block: "make gateway-demo", ready: []string{"127.0.0.1:8088", "127.0.0.1:8089", "127.0.0.1:9001"}},
	{block: "curl -si localhost:8088/api/hello | head -1", want: []match{
		once(`HTTP/1.1 401 Unauthorized`), {`HTTP/1.1 200 OK`, 3}, {`hello alice`, 3},
		once(`HTTP/1.1 429 Too Many Requests`), once(`(?i)Retry-After: \d+`),
	}},
	{block: "make transcode-demo", ready: []string{"127.0.0.1:8094", "127.0.0.1:8095", "127.0.0.1:9094"}},
	{block: "curl -si -H 'X-API-Key: demo-alice-key' localhost:8094/v1/hello/world", want: []match{
		{`HTTP/1.1 200 OK`, 3}, {`\{"message":"Hello, world!"\}`, 3},
		{`HTTP/1.1 429 Too Many Requests`, 2}, once(`(?i)Retry-After: 30\r?\n`), once(`"error":"resource_exhausted"`),
		once(`"error":"rate_limited"`),
	}},
	{block: "make llm-demo", ready: []string{"127.0.0.1:8096", "127.0.0.1:8097", "127.0.0.1:9096"}},
	{block: "curl -si -H 'X-API-Key: demo-alice-key' -d '{\"model\": \"small\", \"prompt\"", want: []match{
		once(`HTTP/1.1 200 OK`), once(`(?i)X-Usage-Input-Tokens: 2\r?\n`), once(`(?i)X-Usage-Output-Tokens: 100\r?\n`),
		once(`(?i)X-Budget-Remaining: 49\.999996 USD\r?\n`), once(`data: \[DONE\]`),
		once(`HTTP/1.1 429 Too Many Requests`), once(`(?i)Retry-After: 1[3-6]\r?\n`),
	}},
	{block: "for i in 1 2 3 4; do\n  curl -si -H 'X-API-Key: demo-bob-key'", want: []match{
		{`HTTP/1.1 200 OK`, 3}, once(`(?i)X-Budget-Remaining: 49\.996 USD\r?\n`), once(`(?i)X-Budget-Remaining: 9\.9958 USD\r?\n`),
		once(`HTTP/1.1 429 Too Many Requests`), once(`(?i)X-Budget-Remaining: 0\.00 USD\r?\n`), once(`(?i)Retry-After: \d+\r?\n`),
	}},
	{block: "curl -s -X PUT -H 'Authorization: Bearer demo-admin-token'", want: []match{
		once(`"remaining":"50\.00"`), once(`HTTP/1.1 200 OK`), once(`(?i)X-Budget-Remaining: 49\.999996 USD\r?\n`),
	}},
	{block: "make llm-demo", ready: []string{"127.0.0.1:8096", "127.0.0.1:8097", "127.0.0.1:9096"}, restart: true},
	{block: "curl -si -H 'X-API-Key: demo-bob-key' -d '{\"model\": \"small\"", want: []match{
		once(`HTTP/1.1 200 OK`), once(`(?i)X-Budget-Remaining: 49\.999955 USD\r?\n`),
	}},
}

// defaultRedisMissing says why the README's Redis step cannot run here:
// it starts (or finds) the standalone Redis of the checkout's .redis
// directory on 127.0.0.1:16379, which only make test's own servers are.
func defaultRedisMissing() string {
	root, _ := os.Getwd()
	if os.Getenv("BOUNCER_REDIS_ADDR") != "127.0.0.1:16379" {
		return "the test Redis is not on 127.0.0.1:16379 (make test starts it there)"
	}
	dir, err := filepath.EvalSymlinks(os.Getenv("BOUNCER_REDIS_DIR"))
	want, err2 := filepath.EvalSymlinks(filepath.Join(root, ".redis"))
	if err != nil || err2 != nil || dir != want {
		return "the test Redis is not the one of this checkout's .redis directory"
	}
	return ""
}

// TestReadmeTour runs README.md's tour as a person would type it: every
// shell block in order, the long-running ones in terminals of their own,
// on the README's own ports. It checks what each block prints against
// what the README says it prints. A tour block the test does not know,
// or a step whose block is gone, fails it: the two change together.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("the tour builds and runs the binary and the examples")
	}
	for _, tool := range []string{"go", "make", "curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tourBlocks(string(readme))
	if len(blocks) != len(tourSteps) {
		var firsts []string
		for _, b := range blocks {
			firsts = append(firsts, fmt.Sprintf("line %d: %s", b.line, strings.SplitN(b.code, "\n", 2)[0]))
		}
		t.Fatalf("README.md's tour has %d shell blocks, the test knows %d steps; the blocks:\n%s", len(blocks), len(tourSteps), strings.Join(firsts, "\n"))
	}
	for i, b := range blocks {
		if !strings.HasPrefix(b.code, tourSteps[i].block) {
			t.Fatalf("README.md line %d: tour block %d starts %q, want step %q", b.line, i+1, strings.SplitN(b.code, "\n", 2)[0], tourSteps[i].block)
		}
	}
	var ports []string
	for _, s := range tourSteps {
		ports = append(ports, s.ready...)
	}
	for _, addr := range ports {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s is taken before the tour starts; the tour needs the README's ports (stop make run and the like)", addr)
		}
	}
	env := tourEnv(t)
	// The LLM demo keeps its counts in .llm-demo/state across restarts:
	// the tour starts it afresh.
	os.RemoveAll(".llm-demo")
	t.Cleanup(func() { os.RemoveAll(".llm-demo") })
	running := map[string]func(){}
	for i, b := range blocks {
		step := tourSteps[i]
		if step.skip != nil {
			if why := step.skip(); why != "" {
				t.Logf("README.md line %d: step left out: %s", b.line, why)
				continue
			}
		}
		if step.ready != nil {
			if stop := running[step.block]; step.restart && stop != nil {
				stop()
			}
			running[step.block] = startTerminal(t, b, env, step.ready)
			continue
		}
		out := runBlock(t, b, env)
		for _, m := range step.want {
			got := len(regexp.MustCompile(m.re).FindAllStringIndex(out, -1))
			if (m.times == 0 && got == 0) || (m.times > 0 && got != m.times) {
				want := "at least once"
				if m.times > 0 {
					want = fmt.Sprintf("%d times", m.times)
				}
				t.Errorf("README.md line %d: %q appears %d times in the output, want %s; the output:\n%s", b.line, m.re, got, want, out)
			}
		}
	}
}

// tourBlocks returns the ```sh blocks of the page's tour section.
func tourBlocks(page string) []snippet {
	lines := strings.Split(page, "\n")
	var out []snippet
	in := false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			in = lines[i] == "## A five-minute tour"
			continue
		}
		if !in || strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		out = append(out, snippet{line: start + 1, code: strings.Join(lines[start:i], "\n")})
	}
	return out
}

// tourEnv is a person's environment: the test's, without make's own
// variables (make test runs this test), and with a bin directory for
// what the tour installs (go install) first on PATH.
func tourEnv(t *testing.T) []string {
	bin := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "GOBIN", "PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// blockTimeout bounds one block; the first go run of a block builds.
const blockTimeout = 5 * time.Minute

// runBlock runs b in bash, in its own process group (killed whole if it
// runs too long), and returns what it printed.
func runBlock(t *testing.T, b snippet, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", b.code)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("README.md line %d: the block did not finish within %v; it printed:\n%s", b.line, blockTimeout, out)
	}
	if err != nil {
		t.Logf("README.md line %d: the block exited with %v", b.line, err)
	}
	return string(out)
}

// startTerminal runs b as a program in a terminal of its own and waits
// until every address in ready accepts connections. The stop it returns,
// which cleanup calls too, stops it as Ctrl-C would and waits for it to
// exit and free its addresses.
func startTerminal(t *testing.T, b snippet, env []string, ready []string) (stop func()) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "terminal.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", b.code)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	printed := func() string { out, _ := os.ReadFile(log.Name()); return string(out) }
	var once sync.Once
	stop = func() { once.Do(func() { stopTerminal(t, b, cmd, exited, ready, printed, log) }) }
	t.Cleanup(stop)
	deadline := time.NewTimer(blockTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, addr := range ready {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("README.md line %d: exited (%v) before %s accepted connections; it printed:\n%s", b.line, err, addr, printed())
			case <-deadline.C:
				t.Fatalf("README.md line %d: %s did not accept connections within %v; it printed:\n%s", b.line, addr, blockTimeout, printed())
			case <-tick.C:
			}
		}
	}
	return stop
}

// stopTerminal stops a terminal's program as Ctrl-C would and waits for
// it to exit and free its addresses.
func stopTerminal(t *testing.T, b snippet, cmd *exec.Cmd, exited chan error, ready []string, printed func() string, log *os.File) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Errorf("README.md line %d: still running 30s after Ctrl-C; it printed:\n%s", b.line, printed())
	}
	// Ctrl-C reaches the whole group; nothing of it may be left
	// listening for the next run.
	for _, addr := range ready {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("README.md line %d: %s still accepts connections after Ctrl-C", b.line, addr)
		}
	}
	log.Close()
}
