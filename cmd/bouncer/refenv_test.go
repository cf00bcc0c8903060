package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/bouncerhq/bouncer/internal/redistest"
)

// kubeletWrite updates dir as the kubelet updates a ConfigMap volume
// (its atomic writer): the files go into a new timestamped directory,
// the visible names are linked through ..data where they are not yet, a
// ..data_tmp link to the new directory is renamed over ..data, and the
// previous directory is removed.
func kubeletWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "..data")
	old, err := os.Readlink(data)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	must(err)
	must(os.Chmod(ts, 0o755))
	for name, body := range files {
		must(os.WriteFile(filepath.Join(ts, name), []byte(body), 0o644))
	}
	for name := range files {
		if _, err := os.Readlink(filepath.Join(dir, name)); os.IsNotExist(err) {
			must(os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	must(os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), data))
	if old != "" {
		must(os.RemoveAll(filepath.Join(dir, old)))
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `bouncer serve` started with nothing but envoyproxy/ratelimit's
// environment, that of Istio's sample manifest, serves as that project
// does: the config of RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config (a
// ConfigMap volume, reloaded on the kubelet's swap), gRPC, /healthcheck
// and /json on the HTTP port, /rlconfig on the debug port, the Redis of
// REDIS_URL, its metric names; and it says in one line which variables
// it read and which it ignored.
func TestServeWithReferenceEnvironment(t *testing.T) {
	addr := redistest.Addr(t)
	domain := "refenv" + strconv.FormatInt(time.Now().UnixNano(), 36) // its own keys in the shared Redis
	config := func(n int) map[string]string {
		return map[string]string{"config.yaml": "domain: " + domain + "\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: " + strconv.Itoa(n) + "}\n"}
	}
	root := filepath.Join(t.TempDir(), "data")
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeletWrite(t, dir, config(2))
	httpAddr, grpcAddr, debugAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	port := func(a string) string { _, p, _ := net.SplitHostPort(a); return p }
	env := []string{runMainEnv + "=1", "USE_STATSD=false", "LOG_LEVEL=debug", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + addr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT=" + port(httpAddr), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(grpcAddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(debugAddr)}
	p := startServeEnv(t, os.Args[0], env)

	logs := p.output()
	for _, want := range []string{
		`read=DEBUG_HOST,DEBUG_PORT,GRPC_HOST,GRPC_PORT,HOST,LOG_LEVEL,PORT,REDIS_SOCKET_TYPE,REDIS_URL,RUNTIME_IGNOREDOTFILES,RUNTIME_ROOT,RUNTIME_SUBDIRECTORY,RUNTIME_WATCH_ROOT ignored=USE_STATSD` +
			" grpc=" + grpcAddr + " http=" + httpAddr + " admin=" + debugAddr + " store=redis://" + addr + " config=" + dir,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}

	rls := rlsClient(t, grpcAddr)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, _, err := decide(t.Context(), rls, domain, "user=grpc")
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("gRPC check %d: got %v, %v; want %v", i+1, resp.GetOverallCode(), err, want)
		}
	}

	if code, body := get(t, "http://"+httpAddr+"/healthcheck"); code != http.StatusOK || body != "OK" {
		t.Errorf("/healthcheck: got %d %q, want 200 \"OK\"", code, body)
	}
	post := func(body string) (int, *pb.RateLimitResponse) {
		t.Helper()
		resp, err := http.Post("http://"+httpAddr+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out pb.RateLimitResponse
		if resp.StatusCode != http.StatusBadRequest {
			if err := protojson.Unmarshal(b, &out); err != nil {
				t.Fatalf("/json answered %d %q: %v", resp.StatusCode, b, err)
			}
		} else if string(b) != "Bad Request\n" {
			t.Errorf("/json 400 body: got %q, want %q", b, "Bad Request\n")
		}
		return resp.StatusCode, &out
	}
	req := `{"domain": "` + domain + `", "descriptors": [{"entries": [{"key": "user", "value": "json"}]}]}`
	if code, resp := post(req); code != http.StatusOK || resp.GetStatuses()[0].GetLimitRemaining() != 1 ||
		resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 2 {
		t.Errorf("/json: got %d %v, want 200 with 1 remaining of 2", code, resp)
	}
	hitsReq := `{"domain": "` + domain + `", "hitsAddend": 5, "descriptors": [{"entries": [{"key": "user", "value": "hits"}]}]}`
	if code, resp := post(hitsReq); code != http.StatusTooManyRequests || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("/json over the limit: got %d %v, want 429 OVER_LIMIT", code, resp)
	}
	if code, _ := post(`{"domain": 7}`); code != http.StatusBadRequest {
		t.Errorf("/json with a bad body: got %d, want 400", code)
	}

	wantDump := domain + ".user: unit=HOUR requests_per_unit=2, shadow_mode: false, quota_mode: false\n"
	if code, body := get(t, "http://"+debugAddr+"/rlconfig"); code != http.StatusOK || body != wantDump {
		t.Errorf("/rlconfig: got %d %q, want 200 %q", code, body, wantDump)
	}
	_, metrics := get(t, "http://"+debugAddr+"/metrics")
	wantHits := `ratelimit_service_rate_limit_total_hits{domain="` + domain + `",key1="user",key2=""} 9`
	if !strings.Contains(metrics, wantHits) {
		t.Errorf("/metrics has no %q (3 gRPC hits, 1 and 5 over /json)", wantHits)
	}

	kubeletWrite(t, dir, config(3))
	until(t, "the ConfigMap swap to reload the config", func() bool {
		_, body := get(t, "http://"+debugAddr+"/rlconfig")
		return strings.Contains(body, "requests_per_unit=3")
	})
}

// readReference maps envoyproxy/ratelimit's variables onto serve's flags,
// lets Bouncer's own flags win, and refuses, with the fix, what it
// cannot honour.
func TestReadReference(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    map[string]string // flag → value after reading
		ignored string
		wantErr string // a substring of the error; "" for none
	}{
		{name: "defaults", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"}, want: map[string]string{
			"config": "/srv/runtime_data/current/config", "http-addr": "0.0.0.0:8080", "grpc-addr": "0.0.0.0:8081",
			"admin-addr": "0.0.0.0:6070", "log-level": "warn", "log-format": "text", "store": "redis://redis:6379", "reference-metrics": "true"}},
		{name: "auth and TLS", env: map[string]string{"REDIS_URL": "redis:6380", "REDIS_AUTH": "user:p@ss", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca.pem"},
			want: map[string]string{"store": "rediss://user:p%40ss@redis:6380", "store-tls-ca": "/ca.pem"}},
		{name: "a URL as it is", env: map[string]string{"REDIS_URL": "rediss://r:6380/2"}, want: map[string]string{"store": "rediss://r:6380/2"}},
		{name: "password alone", env: map[string]string{"REDIS_URL": "redis:6379", "REDIS_AUTH": "secret"},
			want: map[string]string{"store": "redis://:secret@redis:6379"}},
		{name: "cluster", env: map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": "r1:7000, r2:7000"},
			want: map[string]string{"store": "redis://r1:7000,r2:7000"}},
		{name: "sentinel", env: map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_SENTINEL_AUTH": "x"},
			want: map[string]string{"store": "redis://s1:26379?master_set=mymaster&addr=s2%3A26379&sentinel_password=x"}},
		{name: "TLS files without REDIS_TLS are ignored", env: map[string]string{"REDIS_URL": "r:1", "REDIS_TLS_CACERT": "/ca.pem"},
			want: map[string]string{"store-tls-ca": ""}, ignored: "REDIS_TLS_CACERT"},
		{name: "a flag wins", args: []string{"--http-addr", "127.0.0.1:9000", "--store", "memory", "--reference-metrics=false"},
			env:  map[string]string{"PORT": "7000", "REDIS_URL": "r:1", "STATSD_HOST": "s"},
			want: map[string]string{"http-addr": "127.0.0.1:9000", "store": "memory", "reference-metrics": "false"}, ignored: "PORT,REDIS_URL,STATSD_HOST"},
		{name: "log levels", env: map[string]string{"REDIS_URL": "r:1", "LOG_LEVEL": "TRACE", "LOG_FORMAT": "JSON"},
			want: map[string]string{"log-level": "debug", "log-format": "json"}},
		{name: "--config given: not read", args: []string{"--config", "x.yaml"}, env: map[string]string{"PORT": "7000"},
			want: map[string]string{"http-addr": "127.0.0.1:8080", "reference-metrics": "false"}},
		{name: "none set: not read", want: map[string]string{"config": "", "http-addr": "127.0.0.1:8080"}},
		{name: "no REDIS_URL", env: map[string]string{"RUNTIME_ROOT": "/data"}, wantErr: "REDIS_URL is unset"},
		{name: "unix socket", env: map[string]string{"REDIS_SOCKET_TYPE": "unix", "REDIS_URL": "/run/r.sock"}, wantErr: "set REDIS_SOCKET_TYPE=tcp"},
		{name: "two servers, SINGLE", env: map[string]string{"REDIS_URL": "a:1,b:1"}, wantErr: "set REDIS_TYPE=CLUSTER"},
		{name: "memcache", env: map[string]string{"BACKEND_TYPE": "memcache"}, wantErr: "BACKEND_TYPE=memcache: Bouncer counts in Redis"},
		{name: "global shadow mode", env: map[string]string{"SHADOW_MODE": "true"}, wantErr: "set shadow_mode: true on the config's descriptors"},
		{name: "bad port", env: map[string]string{"REDIS_URL": "r:1", "PORT": "http"}, wantErr: `PORT="http": want a port number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c serveConfig
			fs := serveFlags(&c, io.Discard)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := c.readReference(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				got := fs.Lookup(name).Value.String()
				if name == "reference-metrics" {
					got = strconv.FormatBool(c.refMetrics)
				}
				if got != want {
					t.Errorf("--%s: got %q, want %q", name, got, want)
				}
			}
			if c.ref != nil && strings.Join(c.ref.ignored, ",") != tt.ignored {
				t.Errorf("ignored: got %v, want %q", c.ref.ignored, tt.ignored)
			}
		})
	}

	// A BOUNCER_* variable wins too.
	t.Setenv("BOUNCER_LOG_LEVEL", "error")
	var c serveConfig
	fs := serveFlags(&c, io.Discard)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REDIS_URL": "r:1", "LOG_LEVEL": "debug"}
	if err := c.readReference(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.logLevel != "error" || strings.Join(c.ref.ignored, ",") != "LOG_LEVEL" {
		t.Errorf("BOUNCER_LOG_LEVEL=error and LOG_LEVEL=debug: got --log-level %q, ignored %v; want error, [LOG_LEVEL]", c.logLevel, c.ref.ignored)
	}
}

// /rlconfig prints every rule with a limit as envoyproxy/ratelimit's
// debug port does, nested ones under their full path; /healthcheck
// answers OK until shutdown starts, then 500 with an empty body.
func TestRLConfigAndHealthcheck(t *testing.T) {
	ts := startTest(t, map[string]string{"edge.yaml": `domain: edge
descriptors:
  - key: source
    value: proxy
    descriptors:
      - key: dest
        rate_limit: {unit: minute, requests_per_unit: 7}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: internal
    rate_limit: {unlimited: true}
  - key: nolimit
`})
	want := `edge.source_proxy.dest: unit=MINUTE requests_per_unit=7, shadow_mode: false, quota_mode: false
edge.canary: unit=SECOND requests_per_unit=1, shadow_mode: true, quota_mode: false
edge.quota: unit=DAY requests_per_unit=3, shadow_mode: false, quota_mode: true
edge.internal: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false
`
	if code, body := get(t, "http://"+ts.adminAddr+"/rlconfig"); code != http.StatusOK || body != want {
		t.Errorf("/rlconfig: got %d\n%s\nwant 200\n%s", code, body, want)
	}
	if code, body := get(t, "http://"+ts.httpAddr+"/healthcheck"); code != http.StatusOK || body != "OK" {
		t.Errorf("/healthcheck while serving: got %d %q, want 200 \"OK\"", code, body)
	}
	ts.draining.Store(true) // as shutdown does first
	if code, body := get(t, "http://"+ts.httpAddr+"/healthcheck"); code != http.StatusInternalServerError || body != "" {
		t.Errorf("/healthcheck once draining: got %d %q, want 500 and no body", code, body)
	}
}
