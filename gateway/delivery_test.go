package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"github.com/bouncerhq/bouncer/rules"
)

const chargeRules = `domain: llm
rules:
  - name: tokens
    match: [{key: x-key}]
    limits: [{name: minute, algorithm: fixed_window, rate: 100000000, period: 1m}]
`

const chargeGateway = `rules: rules.yaml
listeners: [{addr: "127.0.0.1:0"}]
routes:
  - name: stream
    path_prefix: /stream
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "header:X-Estimate", actual: "header:X-Usage-Tokens"}
  - name: slow
    path_prefix: /slow
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "header:X-Estimate", actual: "header:X-Usage-Tokens", drain_timeout: 20ms}
  - name: long
    path_prefix: /long
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "header:X-Estimate", actual: "header:X-Usage-Tokens", drain_bytes: 4096}
  - name: files
    path_prefix: /files
    upstreams: [UPSTREAM]
    limits:
      domain: llm
      descriptors: [["header:X-Key"]]
      usage: {estimate: "1", actual: bytes}
`

// chargeEnv is a gateway metering on a Ledger in front of an upstream
// that the test writes, for one request: left is closed when the
// gateway's server sees the client go (or the request end), done when
// the gateway's handler has returned, its request settled, and upDone
// when the upstream's has.
type chargeEnv struct {
	gw                 *httptest.Server
	ledger             *edgetest.Ledger
	alarms             *alarmLog
	left, done, upDone chan struct{}
}

func newChargeEnv(t *testing.T, upstream func(e *chargeEnv, w http.ResponseWriter, r *http.Request)) *chargeEnv {
	t.Helper()
	e := &chargeEnv{ledger: &edgetest.Ledger{}, alarms: &alarmLog{}, left: make(chan struct{}), done: make(chan struct{}), upDone: make(chan struct{})}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(e.upDone)
		upstream(e, w, r)
	}))
	t.Cleanup(up.Close)
	cfg, err := gateway.Parse("gateway.yaml", []byte(strings.ReplaceAll(chargeGateway, "UPSTREAM", up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rules.Parse("rules.yaml", []byte(chargeRules))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, e.ledger), Logger: slog.New(e.alarms)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	var served atomic.Bool
	e.gw = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Swap(true) {
			t.Error("a second request reached the gateway")
			return
		}
		defer close(e.done)
		context.AfterFunc(r.Context(), func() { close(e.left) })
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(e.gw.Close)
	return e
}

// send sends a request for path with the estimate est.
func (e *chargeEnv) send(t *testing.T, path, est string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.gw.URL+path, nil)
	req.Header.Set("X-Key", "k1")
	req.Header.Set("X-Estimate", est)
	resp, err := e.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// leaveAfter reads n bytes of resp's body, closes its connection, and
// waits until the gateway has settled the request.
func (e *chargeEnv) leaveAfter(t *testing.T, resp *http.Response, n int) {
	t.Helper()
	if _, err := io.ReadFull(resp.Body, make([]byte, n)); err != nil {
		t.Fatalf("reading %d bytes of the answer: %v", n, err)
	}
	resp.Body.Close() // mid-body: the transport closes the connection
	<-e.done
}

// charged is what the ledger holds once the request has been settled.
func (e *chargeEnv) charged(t *testing.T) int64 {
	t.Helper()
	<-e.done
	if a := e.alarms.take(); len(a) > 0 {
		t.Errorf("logged %q, want nothing at warn or above", a)
	}
	return e.ledger.Sum("minute")
}

// chunks writes n chunks of size bytes, each flushed, and returns the
// bytes written.
func chunks(w http.ResponseWriter, n, size int) (written int64, err error) {
	chunk := strings.Repeat("t", size)
	for range n {
		k, err := io.WriteString(w, chunk)
		written += int64(k)
		if err != nil {
			return written, err
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			return written, err
		}
	}
	return written, nil
}

// A client that reads 9 of 10 chunks of a completion whose usage comes
// in the trailer, and leaves: the gateway reads the rest of the answer
// from the upstream to learn the count, and charges it.
func TestEarlyCloseTrailerIsDrained(t *testing.T) {
	var finished atomic.Bool
	e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Usage-Tokens")
		chunks(w, 9, 100)
		<-e.left
		// The last chunk is large, so that writing it to a client that
		// has gone fails.
		if _, err := chunks(w, 1, 256<<10); err != nil {
			return
		}
		w.Header().Set("X-Usage-Tokens", "1000")
		finished.Store(true)
	})
	e.leaveAfter(t, e.send(t, "/stream", "1"), 900)
	if got := e.charged(t); got != 1000 {
		t.Errorf("charged %d, want 1000, the trailer's count", got)
	}
	<-e.upDone
	if !finished.Load() {
		t.Error("the upstream could not finish its answer: the gateway did not drain it")
	}
}

// A client that leaves an answer whose response header states the
// count is charged that count, whatever it read of the body.
func TestEarlyCloseHeaderCount(t *testing.T) {
	e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Usage-Tokens", "500")
		w.Header().Set("Content-Length", "1048576")
		chunks(w, 90, 1024)
		<-e.left
		chunks(w, 934, 1024)
	})
	e.leaveAfter(t, e.send(t, "/stream", "1"), 64<<10)
	if got := e.charged(t); got != 500 {
		t.Errorf("charged %d, want 500, the header's count", got)
	}
}

// With actual: bytes, a client that leaves is charged the bytes the
// gateway relayed to it: at least what it read, at most what the
// upstream wrote.
func TestEarlyCloseBytes(t *testing.T) {
	var wrote atomic.Int64
	e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1048576")
		n, _ := chunks(w, 100, 1024)
		<-e.left
		m, _ := chunks(w, 924, 1024)
		wrote.Store(n + m)
	})
	const read = 64 << 10
	e.leaveAfter(t, e.send(t, "/files", ""), read)
	got := e.charged(t)
	<-e.upDone
	if got < read || got > wrote.Load() {
		t.Errorf("charged %d, want between %d (read by the client) and %d (written by the upstream)", got, read, wrote.Load())
	}
}

// An upstream that breaks off mid-body, its client still there: the
// request is charged the count its header stated, once.
func TestUpstreamBreaksOffMidBody(t *testing.T) {
	e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Usage-Tokens", "30")
		chunks(w, 4, 100)
		panic(http.ErrAbortHandler)
	})
	resp := e.send(t, "/stream", "1")
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the client read a whole body from an upstream that broke off")
	}
	resp.Body.Close()
	if got := e.charged(t); got != 30 {
		t.Errorf("charged %d, want 30, the header's count", got)
	}
}

// The drain stops at its bounds: the upstream's exchange is ended, and
// the request is charged as an answer without its trailer: the count
// its header states, else the estimate.
func TestDrainBounds(t *testing.T) {
	for _, tc := range []struct {
		name, path, header string
		want               int64
	}{
		{"time, with a count in the header", "/slow", "40", 40},
		{"bytes, with a count in the header", "/long", "40", 40},
		{"time, no count in the header", "/slow", "", 7},
		{"bytes, no count in the header", "/long", "", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "X-Usage-Tokens")
				if tc.header != "" {
					w.Header().Set("X-Usage-Tokens", tc.header)
				}
				chunks(w, 1, 100)
				<-e.left
				if tc.path == "/long" {
					chunks(w, 1<<20, 1024) // until the gateway stops reading
				} else {
					chunks(w, 1, 100)
				}
				<-r.Context().Done() // the gateway ends the exchange
				w.Header().Set("X-Usage-Tokens", "1000")
			})
			e.leaveAfter(t, e.send(t, tc.path, "7"), 100)
			if got := e.charged(t); got != tc.want {
				t.Errorf("charged %d, want %d", got, tc.want)
			}
			<-e.upDone // the upstream's exchange ended: else the test times out
		})
	}
}

// An upstream that states a count in its header and another in its
// announced trailer is charged the trailer's.
func TestTrailerBeforeHeader(t *testing.T) {
	e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Usage-Tokens", "1")
		w.Header().Set("Trailer", "X-Usage-Tokens")
		chunks(w, 3, 100)
		w.Header().Set("X-Usage-Tokens", "300")
	})
	resp := e.send(t, "/stream", "1")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Trailer.Get("X-Usage-Tokens"); got != "300" {
		t.Errorf("the client's trailer X-Usage-Tokens = %q, want 300", got)
	}
	if got := e.charged(t); got != 300 {
		t.Errorf("charged %d, want 300, the trailer's count", got)
	}
}

// An estimate the engine does not take is the client's mistake: 400
// bad_estimate naming the bound, logged below warn, never proxied.
func TestEstimateBounds(t *testing.T) {
	for _, tc := range []struct {
		estimate, message string
		status            int
	}{
		{"1099511627776", "", http.StatusTooManyRequests}, // 2^40: a count, over the limit
		{"1099511627777", "at most 1099511627776", http.StatusBadRequest},
		{"9223372036854775807", "at most 1099511627776", http.StatusBadRequest},
		{"99999999999999999999", "at most 1099511627776", http.StatusBadRequest},
		{"-1", "is not a count", http.StatusBadRequest},
		{"-99999999999999999999", "is not a count", http.StatusBadRequest},
		{"lots", "is not a count", http.StatusBadRequest},
	} {
		t.Run(tc.estimate, func(t *testing.T) {
			var reached atomic.Bool
			e := newChargeEnv(t, func(e *chargeEnv, w http.ResponseWriter, r *http.Request) { reached.Store(true) })
			resp := e.send(t, "/stream", tc.estimate)
			var body struct{ Error, Message string }
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusBadRequest && (body.Error != "bad_estimate" || !strings.Contains(body.Message, tc.message)) {
				t.Errorf("body %+v, want bad_estimate saying %q", body, tc.message)
			}
			if got := e.charged(t); got != 0 {
				t.Errorf("charged %d, want 0", got)
			}
			if reached.Load() {
				t.Error("the request reached the upstream")
			}
		})
	}
}
