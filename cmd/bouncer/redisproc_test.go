package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// redisProc is a private redis-server on loopback that a test starts,
// freezes, kills and restarts as it likes (the shared servers of
// scripts/with-redis.sh serve other tests meanwhile). scripts/redis-up.sh
// installs redis-server; without it the test skips, or fails under
// BOUNCER_REQUIRE_REDIS.
type redisProc struct {
	port int
	dir  string
	srv  *redistest.Server
}

func requireRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("BOUNCER_REQUIRE_REDIS") != "" {
			t.Fatal("redis-server is not on PATH; run scripts/redis-up.sh (it installs Redis)")
		}
		t.Skip("redis-server is not on PATH; scripts/redis-up.sh installs it (make test does)")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	_, p, _ := strings.Cut(freeAddr(t), ":")
	n, _ := strconv.Atoi(p)
	return n
}

// startRedisProc starts redis-server on port and returns once it logs
// that it accepts connections. It is killed when t ends.
func startRedisProc(t *testing.T, port int) *redisProc {
	t.Helper()
	requireRedisServer(t)
	r := &redisProc{port: port, dir: t.TempDir()}
	r.start(t)
	t.Cleanup(func() { r.kill(t) })
	return r
}

func (r *redisProc) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisProc) start(t *testing.T) {
	t.Helper()
	srv, err := redistest.StartServer(r.port, r.dir, "--enable-debug-command", "local")
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
}

// kill kills the server (SIGKILL) and waits for it to exit.
func (r *redisProc) kill(t *testing.T) {
	t.Helper()
	r.srv.Kill()
}

// freeze makes the server sleep for d (DEBUG SLEEP): it accepts
// connections and answers nothing meanwhile. freeze returns at once; the
// returned channel is closed when the server answers again.
func (r *redisProc) freeze(t *testing.T, d time.Duration) <-chan struct{} {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	back := make(chan struct{})
	go func() {
		defer close(back)
		defer c.Close()
		cmd := c.B().Arbitrary("DEBUG", "SLEEP").Args(strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Build()
		close(sent)
		if err := c.Do(context.Background(), cmd).Error(); err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
	}()
	<-sent
	return back
}

// serveProc is a `bouncer serve` child process.
type serveProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	grew chan struct{} // signalled on each write
	done chan struct{}
}

// waitOutput waits until the process has logged sub, failing t after
// 30s.
func (p *serveProc) waitOutput(t *testing.T, sub string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for !strings.Contains(p.output(), sub) {
		select {
		case <-p.grew:
		case <-timeout:
			t.Fatalf("the process has not logged %q within 30s:\n%s", sub, p.output())
		}
	}
}

func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *serveProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case p.grew <- struct{}{}:
	default:
	}
	return p.logs.Write(b)
}

// startServe runs `bouncer serve args...` (this test binary as bouncer)
// and returns once it logs that it serves. It is stopped when t ends.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	return startServeBinary(t, os.Args[0], args...)
}

// startServeBinary is startServe with the bouncer binary bin.
func startServeBinary(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	return startServeEnv(t, bin, append(os.Environ(), runMainEnv+"=1"), args...)
}

// startServeEnv is startServeBinary with the process's environment env
// (its whole environment: runMainEnv included if bin is this test).
func startServeEnv(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{cmd: exec.Command(bin, append([]string{"serve"}, args...)...), done: make(chan struct{}), grew: make(chan struct{}, 1)}
	p.cmd.Env = env
	p.cmd.Stdout = p
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			p.Write([]byte(sc.Text() + "\n"))
			if !seen && strings.Contains(sc.Text(), "msg=serving") {
				seen = true
				close(serving)
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	select {
	case <-serving:
	case <-p.done:
		t.Fatalf("bouncer serve exited before serving:\n%s", p.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("bouncer serve not serving within 30s:\n%s", p.output())
	}
	return p
}
