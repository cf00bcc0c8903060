package linkproxy_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
)

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		o      linkproxy.Options
	}{
		{"empty target", "", linkproxy.Options{}},
		{"no port", "127.0.0.1", linkproxy.Options{}},
		{"too many colons", "127.0.0.1:1:2", linkproxy.Options{}},
		{"negative delay", "127.0.0.1:6379", linkproxy.Options{Delay: -time.Millisecond}},
		{"negative jitter", "127.0.0.1:6379", linkproxy.Options{Jitter: -time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := linkproxy.New(tc.target, tc.o)
			if err == nil {
				p.Close()
				t.Fatalf("New(%q, %+v) = nil error, want one", tc.target, tc.o)
			}
			if !strings.HasPrefix(err.Error(), "linkproxy: ") {
				t.Errorf("got error %q, want it prefixed %q", err, "linkproxy: ")
			}
		})
	}
}

// TestForward sends payloads of many sizes on several connections at
// once, each larger one through many chunks, and counts them.
func TestForward(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{})
	sizes := []int{1, 1000, 1 << 20, 3 << 20}
	var wg sync.WaitGroup
	errs := make(chan error, len(sizes))
	total := 0
	for i, n := range sizes {
		total += n
		c := dial(t, p.Addr())
		msg := bytes.Repeat([]byte{byte('a' + i)}, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- echoed(c, msg)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := linkproxy.Stats{Accepted: int64(len(sizes)), ToTarget: int64(total), FromTarget: int64(total)}
	if got := p.Stats(); got != want {
		t.Errorf("got stats %+v, want %+v", got, want)
	}
}

// echoed writes msg on c while it reads it back, and says what differs.
func echoed(c net.Conn, msg []byte) error {
	c.SetDeadline(time.Now().Add(guard))
	werr := make(chan error, 1)
	go func() { _, err := c.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	if err := errors.Join(err, <-werr); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("the bytes read back differ from those written")
	}
	return nil
}

// TestDelay checks that a round trip takes at least twice the one-way
// delay, with and without jitter; it bounds times from below only.
func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    linkproxy.Options
		min  time.Duration
	}{
		{"delay", linkproxy.Options{Delay: 30 * time.Millisecond}, 60 * time.Millisecond},
		{"jitter", linkproxy.Options{Delay: 10 * time.Millisecond, Jitter: 40 * time.Millisecond, Seed: 7}, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, newProxy(t, echo(t), tc.o).Addr())
			for i := range 5 {
				if d := roundTrip(t, c, "ping"); d < tc.min {
					t.Errorf("round trip %d took %v, want at least %v", i, d, tc.min)
				}
			}
		})
	}
}

// TestSetDelay changes the delay of a connection already open.
func TestSetDelay(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{})
	c := dial(t, p.Addr())
	roundTrip(t, c, "fast")
	p.SetDelay(40 * time.Millisecond)
	if d, want := roundTrip(t, c, "slow"), 80*time.Millisecond; d < want {
		t.Errorf("round trip after SetDelay(40ms) took %v, want at least %v", d, want)
	}
	p.SetDelay(-time.Second) // counts as zero
	roundTrip(t, c, "fast again")
}

// TestOrderUnderJitter sends many small writes through a link whose
// delays vary from chunk to chunk by much more than the writes are
// apart: the bytes must come back in the order they were sent.
func TestOrderUnderJitter(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{Jitter: 5 * time.Millisecond, Seed: 1})
	c := dial(t, p.Addr())
	c.SetDeadline(time.Now().Add(guard))
	const n = 5000
	werr := make(chan error, 1)
	go func() {
		var b [4]byte
		for i := range uint32(n) {
			binary.BigEndian.PutUint32(b[:], i)
			if _, err := c.Write(b[:]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	var b [4]byte
	for i := range uint32(n) {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatalf("reading number %d: %v", i, err)
		}
		if got := binary.BigEndian.Uint32(b[:]); got != i {
			t.Fatalf("got number %d, want %d: bytes overtook others", got, i)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
}

// TestHalfClose checks that the end of a client's stream reaches the
// target after its bytes, and the target's end comes back.
func TestHalfClose(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{Delay: time.Millisecond})
	c := dial(t, p.Addr())
	send(t, c, "last words")
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "last words")
	expectEnd(t, c)
}

// TestTargetDown checks that a connection the proxy cannot pass on is
// closed rather than left hanging.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProxy(t, addr, linkproxy.Options{})
	expectEnd(t, dial(t, p.Addr()))
}
