package linkproxy

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// chunkSize is the most one read takes from a socket.
	chunkSize = 32 << 10
	// queued is how many chunks one direction of a connection holds
	// (at most 2 MiB) before it stops reading, so that the sender's
	// writes block as they do on a full TCP window.
	queued = 64
)

// A chunk is the bytes of one read, or the end of the stream (end), due
// to be delivered at time at.
type chunk struct {
	b   []byte
	at  time.Time
	end bool
}

// serve passes client's bytes to a connection to the target and back,
// until both directions have ended, one side failed, or Close.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	// A partition holds a new connection's first packets too: the
	// target sees the connection when the link is up.
	if !p.waitUp(ctx) {
		return
	}
	var d net.Dialer
	target, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		return
	}

	ended := make(chan struct{}, 2)
	var wg sync.WaitGroup
	pump := func(src, dst net.Conn, count *atomic.Int64) {
		q := make(chan chunk, queued)
		wg.Add(2)
		go func() { defer wg.Done(); p.read(ctx, src, q) }()
		go func() { defer wg.Done(); p.write(ctx, cancel, dst, q, count); ended <- struct{}{} }()
	}
	pump(client, target, &p.toTarget)
	pump(target, client, &p.fromTarget)
	func() {
		for range 2 {
			select {
			case <-ended:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Closing both sockets ends the reads and writes still blocked.
	cancel()
	client.Close()
	target.Close()
	wg.Wait()
}

// read queues what it reads from src and then the end of the stream,
// which travels as bytes do.
func (p *Proxy) read(ctx context.Context, src net.Conn, q chan<- chunk) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.queue(ctx, q, chunk{b: bytes.Clone(buf[:n])}) {
			return
		}
		if err != nil {
			p.queue(ctx, q, chunk{end: true})
			return
		}
	}
}

// queue stamps c with the time it is due and queues it; it reports false
// if ctx ended first.
func (p *Proxy) queue(ctx context.Context, q chan<- chunk, c chunk) bool {
	c.at = time.Now().Add(p.nextDelay())
	select {
	case q <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

// write delivers q's chunks to dst, each at its time and only while the
// link is up. At the end of the stream it closes dst for writing; if a
// write fails, it tears the connection down (fail).
func (p *Proxy) write(ctx context.Context, fail context.CancelFunc, dst net.Conn, q <-chan chunk, count *atomic.Int64) {
	for {
		var c chunk
		select {
		case c = <-q:
		case <-ctx.Done():
			return
		}
		if !sleepUntil(ctx, c.at) || !p.waitUp(ctx) {
			return
		}
		if c.end {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return
		}
		count.Add(int64(len(c.b)))
		if _, err := dst.Write(c.b); err != nil {
			fail()
			return
		}
	}
}

// sleepUntil waits until at; it reports false if ctx ended first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
