package linkproxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
)

// BenchmarkRoundTrip measures a 64-byte round trip to an echo server,
// directly and through a proxy: what the proxy's hop costs, and how far
// a round trip lands above twice its delay.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name  string
		proxy bool
		delay time.Duration
	}{
		{"direct", false, 0},
		{"proxy/delay=0", true, 0},
		{"proxy/delay=1ms", true, time.Millisecond},
		{"proxy/delay=25ms", true, 25 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := echo(b)
			if bc.proxy {
				p, err := linkproxy.New(addr, linkproxy.Options{Delay: bc.delay})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { p.Close() })
				addr = p.Addr()
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg, got := make([]byte, 64), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
