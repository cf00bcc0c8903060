package rlsload

import (
	"context"
	"sync"
)

// leanCaller makes its calls with the Lean client (h2.go), on a
// connection of its own.
type leanCaller struct {
	cl      *h2Client
	w       *workload
	hdr     []byte    // the calls' header block
	streams sync.Pool // of *h2Stream
}

func newLeanCaller(cfg *Config, addr string, w *workload) *leanCaller {
	return &leanCaller{
		cl:  newH2Client(addr, cfg.CallTimeout),
		w:   w,
		hdr: headerBlock(addr, w.method, cfg.CallTimeout),
	}
}

func (c *leanCaller) call(ctx context.Context, k int) (outcome, error) {
	s, ok := c.streams.Get().(*h2Stream)
	if !ok {
		s = newH2Stream()
	}
	defer c.streams.Put(s)
	msg, err := c.cl.unary(ctx, c.hdr, c.w.wire[k], s)
	if err != nil {
		return failed, err
	}
	return c.w.judgeWire(k, msg)
}

func (c *leanCaller) Close() error { return c.cl.Close() }
