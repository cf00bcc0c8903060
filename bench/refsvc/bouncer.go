package refsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoServe is returned by Bouncer.Start while the bouncer binary has no
// serve command.
var ErrNoServe = errors.New("refsvc: the bouncer binary has no serve command yet")

// Bouncer configures `bouncer serve`, built from the checkout this bench
// module belongs to.
type Bouncer struct {
	// Config is the YAML of the configuration file given to --config:
	// Bouncer's own format or envoyproxy/ratelimit's.
	Config string

	// Args are added after the flags Start passes: the store to use, for
	// one (--store redis://host:port).
	Args []string

	// Env is the server's environment (KEY=value) besides PATH, HOME and
	// TMPDIR: no BOUNCER_* variable of this process reaches it.
	Env []string
}

// Binary returns the path of the bouncer binary, building it the first
// time in the process from the parent (root) module, so from the
// checkout's current source.
func (Bouncer) Binary(ctx context.Context) (string, error) {
	return binary(ctx, "bouncer", func(ctx context.Context, dir, bin string) (string, error) {
		out := filepath.Join(bin, "bouncer")
		if _, err := goCmd(ctx, filepath.Dir(dir), nil, "build", "-o", out, "./cmd/bouncer"); err != nil {
			return "", err
		}
		return out, nil
	})
}

// Start builds bouncer if needed and runs
//
//	bouncer serve --config <file holding b.Config> --grpc-addr <free loopback port> \
//		--http-addr= --admin-addr <free loopback port> --log-level warn b.Args...
//
// (the JSON API off, so that it needs no port, the admin listener on for
// its metrics (Server.Admin), and logs at warning level, as the references
// are started), returning once its gRPC API answers. It returns
// ErrNoServe if the binary has no serve command.
func (b Bouncer) Start(ctx context.Context) (*Server, error) {
	path, err := b.Binary(ctx)
	if err != nil {
		return nil, err
	}
	// bouncer help <command> exits 0 for a command it has, 2 otherwise.
	if err := exec.CommandContext(ctx, path, "help", "serve").Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, ErrNoServe
		}
		return nil, fmt.Errorf("refsvc: running %s help serve: %w", path, err)
	}
	dir, err := os.MkdirTemp("", "refsvc-bouncer-")
	if err != nil {
		return nil, fmt.Errorf("refsvc: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	conf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(conf, []byte(b.Config), 0o644); err != nil {
		cleanup()
		return nil, fmt.Errorf("refsvc: writing the configuration: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		cleanup()
		return nil, err
	}
	addr, admin := loopback(ports[0]), loopback(ports[1])
	args := append([]string{"serve", "--config", conf, "--grpc-addr", addr,
		"--http-addr=", "--admin-addr", admin, "--log-level", "warn"}, b.Args...)
	s, err := spawn(ctx, "bouncer", addr, path, args, b.Env, cleanup, func(ctx context.Context) error {
		return grpcServing(ctx, addr)
	})
	if s != nil {
		s.Admin = admin
	}
	return s, err
}

// Metric returns the sum of the samples of the Prometheus metric name
// whose labels contain every one of labels (such as `result="degraded"`)
// on the server's admin listener.
func (s *Server) Metric(ctx context.Context, name string, labels ...string) (float64, error) {
	if s.Admin == "" {
		return 0, fmt.Errorf("refsvc: %s has no admin listener", s.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("refsvc: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("refsvc: %w", err)
	}
	var sum float64
lines:
	for line := range strings.Lines(string(body)) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !(series == name || strings.HasPrefix(series, name+"{")) {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(series, l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("refsvc: %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
