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
		`read=DEBUG_HOST,DEBUG_PORT,GRPC_HOST,GRPC_PORT,HOST,LOG_LEVEL,PORT,REDIS_SOCKET_TYPE,REDIS_URL,RUNTIME_IGNOREDOTFILES,RUNTIME_ROOT,RUNTIME_SUBDIRECTORY,RUNTIME_WATCH_ROOT ignored=USE_STATSD`,
		"store=redis://" + addr, "config=" + dir,
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
