package linkproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
)

// guard bounds every wait of these tests, so that a bug hangs no test:
// it is never what a test asserts.
const guard = 10 * time.Second

// server starts a TCP server on loopback that runs handle on each
// connection; at the end of the test it closes the listener and the
// connections and waits for handle to return.
func server(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); handle(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echo starts a server that writes back what it reads until its client
// closes its side of the connection.
func echo(t testing.TB) string {
	t.Helper()
	return server(t, func(c net.Conn) { io.Copy(c, c) })
}

func newProxy(t *testing.T, target string, o linkproxy.Options) *linkproxy.Proxy {
	t.Helper()
	p, err := linkproxy.New(target, o)
	if err != nil {
		t.Fatalf("New(%q, %+v): %v", target, o, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip sends msg and reads it back, and returns how long that took.
func roundTrip(t *testing.T, c net.Conn, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	send(t, c, msg)
	expect(t, c, msg)
	return time.Since(start)
}

func send(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// expect reads len(want) bytes and fails unless they are want.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(guard))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v", want, err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectTimeout reads with a deadline of d and fails unless the read
// times out: neither a byte, nor the end of the stream, nor a reset.
func expectTimeout(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	switch {
	case n > 0:
		t.Fatalf("read %q through a partition, want a timeout", buf[:n])
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("read: %v, want a timeout (a partition neither ends nor resets a stream)", err)
	case !errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("read: %v, want %v", err, os.ErrDeadlineExceeded)
	}
}

// expectEnd reads and fails unless the stream ends (EOF or reset) before
// guard.
func expectEnd(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(guard))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n > 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want the end of the stream", buf[:n], err)
	}
}
