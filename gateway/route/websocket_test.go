package route_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// The RFC 6455 handshake: section 1.3's key and its accept value.
const (
	wsKey    = "dGhlIHNhbXBsZSBub25jZQ=="
	wsAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
	wsGUID   = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
)

// wsEcho is a WebSocket upstream that echoes every text frame sent to
// /echo.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/echo" {
		http.NotFound(w, r)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		http.Error(w, "not an upgrade", http.StatusBadRequest)
		return
	}
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + wsGUID))
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	brw.Flush()
	for {
		payload, err := readFrame(brw.Reader)
		if err != nil {
			return
		}
		conn.Write(frame(payload, nil))
	}
}

// frame is a final text frame with payload (under 126 bytes), masked if
// mask is not nil.
func frame(payload []byte, mask []byte) []byte {
	b := []byte{0x81, byte(len(payload))}
	if mask == nil {
		return append(b, payload...)
	}
	b[1] |= 0x80
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readFrame reads a frame of under 126 bytes, unmasking it.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int(head[1] & 0x7f)
	if n >= 126 {
		return nil, errors.New("frame too long for the test")
	}
	var mask []byte
	if head[1]&0x80 != 0 {
		mask = make([]byte, 4)
		if _, err := io.ReadFull(r, mask); err != nil {
			return nil, err
		}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, err
	}
	for i := range payload {
		if mask != nil {
			payload[i] ^= mask[i%4]
		}
	}
	return payload, nil
}

func TestWebSocket(t *testing.T) {
	// Long enough for a handshake on a busy machine (it dials the
	// upstream), short enough to outlive by the tunnel.
	const timeout = 250 * time.Millisecond
	up := httptestServer(t, http.HandlerFunc(wsEcho))
	table := newTable(t, []route.Route{
		{Name: "ws", PathPrefix: "/ws", StripPrefix: true, Timeout: timeout, Upstreams: []string{up}},
	}, route.Options{})
	base, _ := gateway(t, table, false)

	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws/echo HTTP/1.1\r\nHost: chat.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", wsKey)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the handshake's answer: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept {
		t.Fatalf("got %s, Sec-WebSocket-Accept %q, want 101 and %q", resp.Status, resp.Header.Get("Sec-WebSocket-Accept"), wsAccept)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("got no X-Request-Id on the 101")
	}

	// Longer than the route's Timeout, which bounds only the handshake:
	// the tunnel must outlive it.
	time.Sleep(3 * timeout)
	for i, msg := range []string{"hello", "again"} {
		if _, err := conn.Write(frame([]byte(msg), []byte{1, 2, 3, byte(i)})); err != nil {
			t.Fatalf("writing frame %d: %v", i, err)
		}
		got, err := readFrame(br)
		if err != nil {
			t.Fatalf("reading the echo of frame %d: %v", i, err)
		}
		if string(got) != msg {
			t.Errorf("got echo %q, want %q", got, msg)
		}
	}
}
