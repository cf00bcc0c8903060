package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/memstore"
)

// Each client address may make 2 requests a minute; a verified user
// (set by authentication middleware with bouncer.WithUser) 100 an hour
// on top.
func ExampleMiddleware() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limit, err := httplimit.Middleware(store, []httplimit.Rule{
		{Name: "per_ip", Key: httplimit.IP(nil), Limits: []bouncer.Limit{
			{Name: "minute", Algorithm: bouncer.TokenBucket, Rate: 2, Period: time.Minute, Burst: 2},
		}},
		{Name: "per_user", Key: httplimit.User(), Limits: []bouncer.Limit{
			{Name: "hour", Algorithm: bouncer.GCRA, Rate: 100, Period: time.Hour, Burst: 10},
		}},
	}, httplimit.Options{Exclude: httplimit.ExcludePaths("/healthz")})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	h := limit(hello)

	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil)) // from 192.0.2.1
		fmt.Println(w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 "per_ip";r=1;t=30 false
	// 200 "per_ip";r=0;t=60 false
	// 429 "per_ip";r=0;t=60 true
}

// An LLM API limited to 1000 tokens a minute per API key, counted in the
// tokens each completion used, which the handler reports once it knows
// them. The client states no estimate: a request reserves 1 token, and
// is charged 1500 once answered, 500 past the limit. Its next request is
// refused until that debt is paid back.
func ExampleUsage() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // a clock that stands still
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	limit, err := httplimit.Middleware(store, []httplimit.Rule{
		{Name: "tokens", Key: httplimit.Header("X-API-Key"), Limits: []bouncer.Limit{
			{Name: "minute", Algorithm: bouncer.TokenBucket, Rate: 1000, Period: time.Minute, Burst: 1000},
		}, Usage: &httplimit.Usage{
			Estimate: httplimit.EstimateHeader("X-Estimated-Tokens"),
			Actual:   httplimit.ActualHeader("X-Usage-Tokens"),
		}},
	}, httplimit.Options{})
	if err != nil {
		panic(err)
	}
	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Usage-Tokens")
		io.WriteString(w, "a long answer\n")
		w.Header().Set("X-Usage-Tokens", "1500") // known at the end
	})
	h := limit(complete)

	for range 2 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		r.Header.Set("X-API-Key", "alice")
		h.ServeHTTP(w, r)
		fmt.Printf("%d %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 "tokens";r=999;t=1 Retry-After: ""
	// 429 "tokens";r=0;t=60 Retry-After: "31"
}
