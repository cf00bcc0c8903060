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
// (set by authentication middleware with httplimit.WithUser) 100 an hour
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
