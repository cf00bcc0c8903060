package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/internal/redistest"
	"github.com/bouncerhq/bouncer/redisstore"
)

// Two servers, each with its own store on one Redis, enforce one limit:
// across both, exactly the limit's requests pass.
func TestTwoServersShareALimitInRedis(t *testing.T) {
	addr := redistest.Addr(t)
	rule := httplimit.Rule{
		Name:   fmt.Sprintf("shared-%d", time.Now().UnixNano()), // a fresh key in a Redis other tests share
		Key:    httplimit.Header("X-User"),
		Limits: []bouncer.Limit{{Name: "h", Algorithm: bouncer.GCRA, Rate: 7, Period: time.Hour, Burst: 7}},
	}
	var srvs []string
	for range 2 {
		s, err := redisstore.New(redisstore.Options{URL: "redis://" + addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if h := s.Health(); !h.Connected {
			t.Fatalf("store not connected to a healthy Redis: %v", h.ConnectError)
		}
		srv := serve(t, s, []httplimit.Rule{rule}, httplimit.Options{}, nil)
		srvs = append(srvs, srv.URL)
	}
	ok, denied := 0, 0
	for i := range 20 {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srvs[i%2], nil)
		req.Header.Set("X-User", "u1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Bouncer-Degraded") != "" {
			t.Fatalf("request %d decided without Redis", i)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			denied++
		default:
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if ok != 7 || denied != 13 {
		t.Fatalf("%d allowed and %d denied across two servers, want 7 and 13", ok, denied)
	}
}
