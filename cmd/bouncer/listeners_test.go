package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A client that sends a request slowly, or never finishes it, holds a
// connection for the listener's timeouts, not for ever; one that sends
// more header bytes than allowed is refused.
func TestServeListenerTimeouts(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig}, func(c *serveConfig) {
		c.readHeaderTimeout = 200 * time.Millisecond
		c.readTimeout = 300 * time.Millisecond
		c.maxHeaderBytes = 4096
	})
	// cutOff sends what to addr and reads until the server closes the
	// connection, which it must do well before the client's own
	// deadline; it returns what the server answered.
	cutOff := func(t *testing.T, addr, what string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, what); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server still holds the connection after 20 s (got %q)", got)
		}
		return string(got)
	}
	for _, l := range []struct{ name, addr string }{{"json", ts.httpAddr}, {"admin", ts.adminAddr}} {
		t.Run(l.name+"/half a body", func(t *testing.T) {
			cutOff(t, l.addr, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"domain\"")
		})
		t.Run(l.name+"/half the headers", func(t *testing.T) {
			cutOff(t, l.addr, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-")
		})
		t.Run(l.name+"/idle before a request", func(t *testing.T) {
			cutOff(t, l.addr, "")
		})
		t.Run(l.name+"/oversized headers", func(t *testing.T) {
			got := cutOff(t, l.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
			if !strings.HasPrefix(got, "HTTP/1.1 431") {
				t.Fatalf("got %.60q, want 431 Request Header Fields Too Large", got)
			}
		})
	}
	t.Run("grpc/no handshake", func(t *testing.T) {
		cutOff(t, ts.grpcAddr, "")
	})
	t.Run("json/a request within the timeouts", func(t *testing.T) {
		c, err := net.Dial("tcp", ts.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"domain":"app","descriptors":[{"entries":[{"key":"user","value":"t"}]}]}`
		io.WriteString(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d, want 200", resp.StatusCode)
		}
	})
}

// POST /v1/check takes JSON: another Content-Type is 415, with a JSON
// error, through the real listener.
func TestServeJSONContentType(t *testing.T) {
	ts := startTest(t, map[string]string{"app.yaml": appConfig})
	body := `{"domain":"app","descriptors":[{"entries":[{"key":"user","value":"ct"}]}]}`
	for _, tc := range []struct {
		ct   string
		want int
	}{{"application/json", 200}, {"text/plain", 415}, {"application/x-www-form-urlencoded", 415}} {
		resp, err := ts.web.Post("http://"+ts.httpAddr+"/v1/check", tc.ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("Content-Type %s: got %d %s (%s), want %d with a JSON body", tc.ct, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.want)
		}
	}
}

// A listener whose address is taken says which flag gave it, the reason
// alone, and where the other listeners are, so that the operator knows
// what to change.
func TestServeBusyPortNamesTheFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	grpcAddr, adminAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	writeConfig(t, dir, "app.yaml", appConfig)
	c := defaultServeConfig(t)
	c.config, c.grpcAddr, c.httpAddr, c.adminAddr = dir, grpcAddr, busy.Addr().String(), adminAddr
	o, err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	_, err = startService(t.Context(), c, o, newLogger(io.Discard, "text", 0))
	want := "--http-addr " + busy.Addr().String() + ": address already in use; the other listeners: grpc " + grpcAddr + ", admin " + adminAddr
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}

	// Given by envoyproxy/ratelimit's variables, the address names them.
	c.ref = &refEnv{flags: map[string][]string{"http-addr": {"HOST", "PORT"}}}
	_, err = startService(t.Context(), c, o, newLogger(io.Discard, "text", 0))
	want = "--http-addr (from HOST, PORT) " + busy.Addr().String() + ": address already in use"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want it to start %q", err, want)
	}
}
