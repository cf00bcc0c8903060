package httpretry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/bouncerhq/bouncer/httpretry"
)

// reply is one scripted answer of a test server.
type reply struct {
	status int
	header http.Header
	hangUp bool // reset the connection instead of answering
}

// script answers its nth request with replies[n], and with its last reply
// ever after, and records what it received.
type script struct {
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	conns   map[string]bool // remote addresses
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	if s.conns == nil {
		s.conns = map[string]bool{}
	}
	s.conns[r.RemoteAddr] = true
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	if rep.hangUp {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.(*net.TCPConn).SetLinger(0) // a reset, not an orderly close
		conn.Close()
		return
	}
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, "a body the client drains\n")
}

// attempts is the number of requests the server received.
func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// connections is the number of connections the requests came on.
func (s *script) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *script) received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies
}

// serve starts a real server answering with replies, closed at the end
// of the test (with its client's idle connections).
func serve(t *testing.T, replies ...reply) (*httptest.Server, *script) {
	t.Helper()
	s := &script{replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s
}

// serveFunc starts a real server running f, closed at the end of the
// test.
func serveFunc(t *testing.T, f http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

// newTransport is a Transport to srv on clock c, whose jitter always
// draws one half.
func newTransport(srv *httptest.Server, c *clock) *httpretry.Transport {
	return &httpretry.Transport{
		Base:  srv.Client().Transport,
		Now:   c.Now,
		Sleep: c.Sleep,
		Rand:  func() float64 { return 0.5 },
	}
}

// get sends a GET to srv through rt and returns the answer's status (0
// for an error) with the error; the body is read and closed.
func get(ctx context.Context, t *testing.T, rt http.RoundTripper, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(rt, req)
}

func send(rt http.RoundTripper, req *http.Request) (int, error) {
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// h makes a header from name, value pairs.
func h(kv ...string) http.Header {
	hd := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		hd.Add(kv[i], kv[i+1])
	}
	return hd
}
