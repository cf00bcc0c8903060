package rlqs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bouncerhq/bouncer/rlqs"
	"github.com/bouncerhq/bouncer/storetest"
)

// In front of an HTTP handler or a gRPC server, a client decides each
// request by the bucket its attributes make: a denied request is a 429
// with a JSON body (and Retry-After when the bucket says when to come
// back), or RESOURCE_EXHAUSTED; a request with no bucket passes.
func TestClientAtTheEdge(t *testing.T) {
	clock := storetest.NewClock(start)
	cc := serve(t, &rlqs.Server{Engine: engine(t, mixed, clock), Now: clock.Now})
	c := client(t, cc, rlqs.ClientOptions{Domain: "mix", Now: clock.Now, NoAssignment: denyAll})
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := c.Handler(ok, func(r *http.Request) map[string]string {
		if r.Header.Get("X-Tenant") == "" {
			return nil
		}
		return map[string]string{"tenant": r.Header.Get("X-Tenant"), "method": r.Method}
	})
	get := func(tenant string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tenant != "" {
			r.Header.Set("X-Tenant", tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get(""); w.Code != http.StatusNoContent {
		t.Errorf("no bucket: %d, want 204", w.Code)
	}
	w := get("a")
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Header().Get("Content-Type"), "json") || w.Header().Get("Retry-After") != "" {
		t.Errorf("no assignment yet (DENY_ALL): %d %q, Retry-After %q; want 429 JSON without Retry-After", w.Code, w.Header().Get("Content-Type"), w.Header().Get("Retry-After"))
	}
	syncAll(t, c) // 10 a second, 10 at once
	for i := range 10 {
		if w := get("a"); w.Code != http.StatusNoContent {
			t.Fatalf("request %d of 10 at once: %d, want 204", i, w.Code)
		}
	}
	if w := get("a"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("the 11th: %d, Retry-After %q; want 429, 1 (a token in 100 ms, rounded up)", w.Code, w.Header().Get("Retry-After"))
	}
	unary := c.Unary(func(_ context.Context, method string) map[string]string {
		return map[string]string{"tenant": "a", "method": "GET"}
	})
	called := 0
	handler := func(context.Context, any) (any, error) { called++; return "done", nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Get"}
	if _, err := unary(context.Background(), nil, info, handler); status.Code(err) != codes.ResourceExhausted || called != 0 {
		t.Errorf("a call with the bucket empty: %v (handler called %d times), want RESOURCE_EXHAUSTED", err, called)
	}
	clock.Advance(100 * time.Millisecond)
	if got, err := unary(context.Background(), nil, info, handler); err != nil || got != "done" {
		t.Errorf("a call 100 ms later: %v, %v; want the handler's answer", got, err)
	}
}
