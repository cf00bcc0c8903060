package linkproxy_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
)

// wait is how long a read waits for what a partition holds.
const wait = 200 * time.Millisecond

// TestPartition cuts a link with connections open and one made during
// the cut: nothing arrives, nothing ends, nothing resets; after the heal
// what was held arrives in order and every connection works.
func TestPartition(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{Delay: time.Millisecond})
	before, closing := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, before, "up")
	roundTrip(t, closing, "up")

	p.Partition()
	p.Partition() // twice is once
	send(t, before, "held")
	expectTimeout(t, before, wait)
	send(t, closing, "bye")
	if err := closing.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expectTimeout(t, closing, wait) // not the end of the stream: it is held too
	during := dial(t, p.Addr())     // accepted, but nothing flows
	send(t, during, "new")
	expectTimeout(t, during, wait)

	p.Heal()
	p.Heal() // twice is once
	expect(t, before, "held")
	roundTrip(t, before, "after")
	expect(t, closing, "bye")
	expectEnd(t, closing)
	expect(t, during, "new")
	roundTrip(t, during, "after")
	if got := p.Stats().Accepted; got != 3 {
		t.Errorf("got %d connections accepted, want 3", got)
	}
}

// TestCloseEndsConnections closes a partitioned proxy holding bytes:
// its clients see their streams end, and nobody can connect any more.
func TestCloseEndsConnections(t *testing.T) {
	p := newProxy(t, echo(t), linkproxy.Options{})
	c := dial(t, p.Addr())
	roundTrip(t, c, "up")
	p.Partition()
	send(t, c, "held")
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	expectEnd(t, c)
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Errorf("dialing a closed proxy succeeded")
	}
}

// TestCloseWhileWriteBlocked closes a proxy whose target stopped
// reading, so that its writes block: Close still returns (and goleak
// finds no goroutine left).
func TestCloseWhileWriteBlocked(t *testing.T) {
	accepted, stop := make(chan struct{}), make(chan struct{})
	sink := server(t, func(net.Conn) {
		close(accepted)
		<-stop // never reading
	})
	t.Cleanup(func() { close(stop) })
	p := newProxy(t, sink, linkproxy.Options{})
	c := dial(t, p.Addr())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.SetWriteDeadline(time.Now().Add(guard))
		c.Write(make([]byte, 64<<20)) // more than every buffer on the way holds
	}()
	<-accepted
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
}
