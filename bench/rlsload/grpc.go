package rlsload

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// grpcCaller makes its calls with grpc-go, on a connection of its own.
type grpcCaller struct {
	cc      *grpc.ClientConn
	w       *workload
	timeout time.Duration
}

func newGRPCCaller(cfg *Config, addr string, w *workload) (*grpcCaller, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &grpcCaller{cc: cc, w: w, timeout: cfg.CallTimeout}, nil
}

func (c *grpcCaller) call(ctx context.Context, k int) (outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp := c.w.newResp()
	if err := c.cc.Invoke(ctx, c.w.method, c.w.reqs[k], resp); err != nil {
		return failed, err
	}
	return c.w.judge(k, resp)
}

func (c *grpcCaller) Close() error { return c.cc.Close() }
