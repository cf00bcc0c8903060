//go:build linux

package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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

// nginx's row is Linux's only: its CPU time is read from /proc, and its
// master is sent SIGTERM (Pdeathsig) if the benchmark dies, which stops
// its workers too (SIGKILL would leave them running).
func init() {
	gwImpls = append(gwImpls, gwImpl{name: gwNginx, start: startNginx, keepaliveRequests: 1000, limited: startNginxLimited})
}

// gwNginx is nginx's row: nginx with limit_req in front of the upstream.
const gwNginx = "nginx-limit-req"

// nginxBin is where Debian's nginx package puts nginx.
const nginxBin = "/usr/sbin/nginx"

// nginxConf is the config the benchmark runs nginx with. Its main and
// http parts are Debian's nginx.conf (worker_processes auto, 768
// connections a worker, sendfile, tcp_nopush and gzip, none of which
// touches a 2-byte proxied answer) with every path nginx writes in DIR,
// and without Debian's user www-data (root's nginx runs its workers as
// nginx's default, nobody; anyone else's runs them as itself). Its
// server is what a user fronting an API with nginx writes: a limit per
// bearer token (nginx open source cannot verify a JWT, so the key is the
// Authorization header as sent, and a request without one is not limited
// at all), denials answered 429 (nginx's default is 503), and the
// upstream proxied with keep-alive as nginx's documentation of upstream
// keepalive says (keepalive 32, HTTP/1.1, an empty Connection header):
// the one setting for speed beyond nginx's defaults, without which it
// would open a connection to the upstream for every request, where Caddy
// and the gateway reuse theirs. The access log is on, in nginx's combined
// format, written 64 KiB at a time (the gateway formats a line per
// request too); the error log takes errors only. Everything else is at
// nginx's defaults, among them 1000 requests per keep-alive connection,
// the client's and the upstream's.
const nginxConf = `worker_processes auto;
pid DIR/nginx.pid;
error_log DIR/error.log error;

events {
	worker_connections 768;
}

http {
	sendfile on;
	tcp_nopush on;
	types_hash_max_size 2048;
	gzip on;

	access_log DIR/access.log combined buffer=64k;
	client_body_temp_path DIR/client_body;
	proxy_temp_path DIR/proxy;
	fastcgi_temp_path DIR/fastcgi;
	uwsgi_temp_path DIR/uwsgi;
	scgi_temp_path DIR/scgi;

	limit_req_zone $http_authorization zone=per_token:10m rate=RATE;
	limit_req_status 429;

	upstream api {
		server UPSTREAM;
		keepalive 32;
	}

	server {
		listen 127.0.0.1:PORT;

		location / {
			limit_req zone=per_token BURST nodelay;
			proxy_pass http://api;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
`

// nginxLimit is a limit per token nginx runs with, and what nginx's
// error log holds once it has stopped.
type nginxLimit struct {
	rate  string // limit_req_zone's
	burst string // limit_req's: "burst=n", or "" for none
	// log is what a line of the error log holds; "" means the log is
	// empty.
	log string
}

var (
	// nginxBench is the benchmark's limit: the gateway's 10⁸ an hour
	// (gwLimit) as near as nginx's rates, per second or per minute, come,
	// with a burst as large taken at once (nodelay). No run comes near
	// it, and nothing is logged: a denial logs at error.
	nginxBench = nginxLimit{rate: "1666666r/m", burst: "burst=100000000"}
	// nginxTiny is one request a minute without a burst, whose denials
	// are limit_req's.
	nginxTiny = nginxLimit{rate: "1r/m", log: "limiting requests"}
)

// startNginx is nginx (nginxConf) as a process of its own, master and
// workers, on a free loopback port in front of upstream, with
// nginxBench's limit; its cpu is its processes'. It fails tb if nginx
// logged an error. Without nginx it skips, unless BOUNCER_REQUIRE_NGINX
// is set, when it fails.
func startNginx(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	n := runNginx(tb, upstream, nginxBench)
	return gwProxy{url: n.url, cpu: n.cpu}
}

// startNginxLimited is startNginx at nginxTiny's limit, which fails tb
// unless nginx logged a denial of limit_req's.
func startNginxLimited(tb testing.TB, upstream string) string {
	tb.Helper()
	return runNginx(tb, upstream, nginxTiny).url
}

// nginxProc is a running nginx.
type nginxProc struct {
	url string
	dir string // its prefix, holding its config, logs and temporary files
	pid int    // the master's
	// workers are the master's children when cpu last looked.
	workers []int
}

// runNginx starts nginx with nginxConf and limit in a temporary
// directory, and when tb ends stops it (SIGTERM, nginx's fast shutdown),
// waits for it and checks its error log against limit.log.
func runNginx(tb testing.TB, upstream string, limit nginxLimit) *nginxProc {
	tb.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		if os.Getenv("BOUNCER_REQUIRE_NGINX") != "" {
			tb.Fatalf("nginx: %v; install Debian's nginx package (scripts/bench-gateway.sh does)", err)
		}
		tb.Skipf("nginx: %v, so its row skips; install Debian's nginx package (apt-get install nginx)", err)
	}
	host := strings.TrimPrefix(upstream, "http://")
	var lastErr error
	for range 5 {
		port, err := freePort(false, nil)
		if err != nil {
			tb.Fatal(err)
		}
		dir := tb.TempDir()
		conf := strings.NewReplacer("DIR", dir, "UPSTREAM", host, "PORT", strconv.Itoa(port),
			"RATE", limit.rate, "BURST", limit.burst).Replace(nginxConf)
		if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
			tb.Fatal(err)
		}
		// A file, not a pipe: a worker left running would keep a pipe
		// open, and cmd.Wait waiting for it.
		stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
		if err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(nginxBin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		err = cmd.Start()
		stderr.Close()
		if err != nil {
			tb.Fatalf("starting nginx: %v", err)
		}
		var waitErr error
		exited := make(chan struct{})
		go func() { waitErr = cmd.Wait(); close(exited) }()
		// stop stops nginx as nginx -s stop does (SIGTERM: the master
		// stops its workers, then itself), or kills it after 10s.
		stop := func() error {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
				return errors.New("nginx did not stop within 10s of SIGTERM")
			}
			return waitErr
		}
		if lastErr = waitNginx(dir, cmd.Process.Pid, exited); lastErr != nil {
			stop()
			out, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
			lastErr = fmt.Errorf("%w; its output: %q", lastErr, out)
			continue // the port was taken since freePort, say
		}
		tb.Cleanup(func() {
			if err := stop(); err != nil {
				out, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
				tb.Errorf("stopping nginx: %v; its output: %q", err, out)
			}
			log, err := os.ReadFile(filepath.Join(dir, "error.log"))
			switch {
			case err != nil:
				tb.Error(err)
			case limit.log == "" && len(log) > 0:
				tb.Errorf("nginx's error log: %q, want it empty", log)
			case limit.log != "" && !bytes.Contains(log, []byte(limit.log)):
				tb.Errorf("nginx's error log: %q, want a line with %q", log, limit.log)
			}
		})
		return &nginxProc{url: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir, pid: cmd.Process.Pid}
	}
	tb.Fatalf("nginx did not start: %v", lastErr)
	return nil
}

// waitNginx waits until the nginx master pid has written its pid file in
// dir, which it does once its listener is bound, or has exited.
func waitNginx(dir string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return errors.New("nginx exited")
		default:
		}
		if b, err := os.ReadFile(filepath.Join(dir, "nginx.pid")); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nginx wrote no pid file within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpu returns the CPU time, user and system, n's master and workers have
// used so far: for each of their threads the time it has run, in
// nanoseconds, from /proc/<pid>/task/<tid>/schedstat (the total that
// getrusage splits into user and system, and precise where
// /proc/<pid>/stat counts 10 ms ticks). It fails if the workers changed
// since it last looked: a worker that exited took its time with it.
func (n *nginxProc) cpu() (time.Duration, error) {
	workers, err := children(n.pid)
	if err != nil {
		return 0, err
	}
	if len(workers) == 0 || n.workers != nil && !slices.Equal(workers, n.workers) {
		return 0, fmt.Errorf("nginx's workers: %v, were %v: a worker exited, and its CPU time with it", workers, n.workers)
	}
	n.workers = workers
	var total time.Duration
	for _, pid := range append([]int{n.pid}, workers...) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(tasks) == 0 {
			return 0, fmt.Errorf("nginx process %d: no schedstat (%v)", pid, err)
		}
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				return 0, err
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				return 0, fmt.Errorf("%s: %q, want the run time in ns first", t, b)
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %v", t, err)
			}
			total += time.Duration(ns)
		}
	}
	return total, nil
}

// children returns the pids of the processes whose parent is pid, in
// order, found in /proc (this kernel need not have
// /proc/<pid>/task/<tid>/children).
func children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // it has exited since
		}
		if err != nil {
			return nil, err
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 {
			return nil, fmt.Errorf("/proc/%d/stat: %q", p, b)
		}
		if f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}
