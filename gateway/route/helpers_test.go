package route_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/storetest"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// lookup is the target of r's View in table.
func lookup(t *testing.T, table *route.Table, r *http.Request) *route.Target {
	t.Helper()
	v, err := route.NewView(r, nil)
	if err != nil {
		t.Fatalf("NewView(%s): %v", r.URL, err)
	}
	return table.Lookup(&v)
}

// newTable is route.New that fails the test on error and closes the table
// when the test ends.
func newTable(t *testing.T, routes []route.Route, o route.Options) *route.Table {
	t.Helper()
	if o.Logger == nil {
		o.Logger = discard()
	}
	table, err := route.New(routes, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(table.Close)
	return table
}

// gateway serves table on a loopback listener, HTTP/1.1 and cleartext
// HTTP/2, as the gateway does: Lookup, then the target, or 404. With
// buffer, a middleware first reads the request body and sets GetBody, as
// one that makes bodies replayable would. It returns the base URL and a
// client, both closed when the test ends.
func gateway(t *testing.T, table *route.Table, buffer bool) (string, *http.Client) {
	t.Helper()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := route.NewView(r, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if target := table.Lookup(&v); target != nil {
			target.Serve(w, r, &v)
			return
		}
		http.Error(w, "no route", http.StatusNotFound)
	})
	if buffer {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
			next.ServeHTTP(w, r)
		})
	}
	addr := serve(t, h)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return "http://" + addr, &http.Client{Transport: tr}
}

// serve serves h on a loopback listener, HTTP/1.1 and cleartext HTTP/2,
// until the test ends, and returns its address.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return lis.Addr().String()
}

// seen is what an echo upstream received, and sends back as JSON.
type seen struct {
	Upstream string
	Method   string
	Path     string // escaped, as sent
	Query    string
	Host     string
	Header   http.Header
	Body     string
}

// echo is an upstream that answers every request with what it received.
type echo struct {
	*httptest.Server
	name string
	hits atomic.Int64
}

func newEcho(t *testing.T, name string) *echo {
	t.Helper()
	e := &echo{name: name}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{
			Upstream: name, Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Host: r.Host, Header: r.Header, Body: string(body),
		})
	}))
	t.Cleanup(e.Close)
	return e
}

// do sends req through client and returns the status, the headers and the
// body.
func do(t *testing.T, client *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func get(t *testing.T, client *http.Client, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, client, req)
}

// decodeSeen decodes an echo upstream's answer.
func decodeSeen(t *testing.T, body string) seen {
	t.Helper()
	var s seen
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("decoding the upstream's echo %q: %v", body, err)
	}
	return s
}

// errorBody is the proxy's JSON error.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func decodeError(t *testing.T, body string) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("decoding the error %q: %v", body, err)
	}
	return e
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// newClock is a clock the test moves by hand.
func newClock() *storetest.Clock {
	return storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// logBuffer collects log lines from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// lines returns the lines of s that contain want.
func lines(s, want string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, want) {
			out = append(out, line)
		}
	}
	return out
}
