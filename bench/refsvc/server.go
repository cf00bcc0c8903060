package refsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// StartTimeout bounds how long a Start waits for its server to answer when
// its context has no deadline.
const StartTimeout = 60 * time.Second

// Server is a reference service running as a child process. Its methods
// are safe for concurrent use.
type Server struct {
	// Name says which service runs: "envoy-ratelimit", "gubernator" or
	// "bouncer".
	Name string
	// Addr is the host:port of its gRPC API.
	Addr string
	// Admin is the host:port of its admin listener (metrics), or "" if
	// it runs none: bouncer's only.
	Admin string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // how it exited, once exited is closed
	out     *tail
	cleanup func() // removes what the server's start created, or nil

	stopOnce sync.Once
}

// Stop kills the server's process, waits for it to exit, and removes its
// files. It is idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if s.cleanup != nil {
			s.cleanup()
		}
	})
}

// Output returns the end of what the server wrote to its standard output
// and error (at most 64 KiB).
func (s *Server) Output() string { return s.out.String() }

// ServerCPUsEnv names the environment variable that, when set to a CPU
// list such as "0", makes every server start pinned to those CPUs (with
// taskset). The benchmarks of docs/benchmarks.md pin the servers to one
// CPU and the load generator and Redis to the other, so that each server
// is measured on a CPU of its own.
const ServerCPUsEnv = "BOUNCER_BENCH_SERVER_CPUS"

// spawn starts the binary at path with args and exactly the environment
// env (plus PATH, HOME and TMPDIR of this process), then calls ready
// until it returns nil, the process exits, or ctx (bounded by
// StartTimeout) ends. On failure the process is stopped and cleanup run.
func spawn(ctx context.Context, name, addr, path string, args, env []string, cleanup func(), ready func(ctx context.Context) error) (*Server, error) {
	cmd := exec.Command(path, args...)
	if cpus := os.Getenv(ServerCPUsEnv); cpus != "" {
		// Pin the server under test, so that the load generator (and
		// Redis) running on the other CPUs do not take its time.
		cmd = exec.Command("taskset", append([]string{"-c", cpus, path}, args...)...)
	}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out := &tail{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, fmt.Errorf("refsvc: starting %s: %w", name, err)
	}
	s := &Server{Name: name, Addr: addr, cmd: cmd, exited: make(chan struct{}), out: out, cleanup: cleanup}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, StartTimeout)
		defer cancel()
	}
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		last = ready(pctx)
		cancel()
		if last == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			s.Stop()
			return nil, fmt.Errorf("refsvc: %s exited while starting (%v); its output:\n%s", name, s.waitErr, s.Output())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("refsvc: %s did not answer on %s (%v: %v); its output:\n%s", name, addr, ctx.Err(), last, s.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago and whose UDP ports were free too (gubernator's member list uses
// both). Another process may take one before the server binds it; the
// server then fails to start, and says why.
func freePorts(n int) ([]int, error) { return freePortsOn("127.0.0.1", n) }

// freePortsOn is freePorts on the address ip.
func freePortsOn(ip string, n int) ([]int, error) {
	var ports []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("refsvc: finding a free port: %w", err)
		}
		hold = append(hold, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue // the UDP port is taken; keep the TCP one held and try another
		}
		u.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

func loopback(port int) string { return hostPort("127.0.0.1", port) }

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// errNotReady is what a readiness probe returns for a server that answers
// but is not serving yet.
var errNotReady = errors.New("not serving yet")

// grpcServing asks the gRPC health service at addr about the server as a
// whole. A server without a health service is serving once it answers.
func grpcServing(ctx context.Context, addr string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil
	case err != nil:
		return err
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("%w: health %v", errNotReady, resp.GetStatus())
	}
	return nil
}
