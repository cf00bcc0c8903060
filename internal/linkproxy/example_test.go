package linkproxy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
)

// A link of 50–150 ms round trip to an echo server, cut and healed.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	p, _ := linkproxy.New(ln.Addr().String(), linkproxy.Options{Delay: 25 * time.Millisecond, Jitter: 50 * time.Millisecond})
	defer p.Close()
	c, _ := net.Dial("tcp", p.Addr())
	defer c.Close()
	buf := make([]byte, 4)

	start := time.Now()
	c.Write([]byte("ping"))
	io.ReadFull(c, buf)
	fmt.Println(string(buf), time.Since(start) >= 50*time.Millisecond)

	p.Partition()
	c.Write([]byte("held"))
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(buf)
	fmt.Println(errors.Is(err, os.ErrDeadlineExceeded))

	p.Heal()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.ReadFull(c, buf)
	fmt.Println(string(buf))
	fmt.Printf("%+v\n", p.Stats())
	// Output:
	// ping true
	// true
	// held
	// {Accepted:1 ToTarget:8 FromTarget:8}
}
