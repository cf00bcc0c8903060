package rlqs

import (
	"context"
	"math"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/header"
)

// Handler decides each request of next by c, as Envoy's filter does in
// front of an upstream: bucket builds a request's bucket id from its
// attributes (nil: the request is not limited). A denied request is
// answered 429 with the JSON body of a denial (header.WriteDenied) and,
// when its bucket's token bucket says when a request would pass,
// Retry-After.
func (c *Client) Handler(next http.Handler, bucket func(*http.Request) map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := bucket(r)
		if id == nil {
			next.ServeHTTP(w, r)
			return
		}
		if ok, wait := c.allow(id); !ok {
			header.WriteDenied(w, r, header.Values{RetryAfter: retryAfter(wait)}, header.Off, "over the quota")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func retryAfter(wait time.Duration) time.Duration {
	if wait < 0 {
		return math.MaxInt64 // not known: no Retry-After
	}
	return wait
}

// Unary is a gRPC unary server interceptor deciding each call by c:
// bucket builds a call's bucket id from its context and full method
// name (nil: the call is not limited). A denied call fails with
// RESOURCE_EXHAUSTED.
func (c *Client) Unary(bucket func(ctx context.Context, method string) map[string]string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := c.admit(bucket(ctx, info.FullMethod)); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream is Unary for streaming calls: a stream is one request.
func (c *Client) Stream(bucket func(ctx context.Context, method string) map[string]string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := c.admit(bucket(ss.Context(), info.FullMethod)); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

func (c *Client) admit(id map[string]string) error {
	if id == nil {
		return nil
	}
	if ok, _ := c.allow(id); !ok {
		return status.Error(codes.ResourceExhausted, "over the quota")
	}
	return nil
}
