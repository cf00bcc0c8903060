package header_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
)

// A server writes the headers of a denied decision; a client parses them
// back.
func Example() {
	v := header.Values{
		Policy: "per_minute", Limit: 100, Window: time.Minute,
		Remaining: 0, Reset: 12500 * time.Millisecond,
		Denied: true, RetryAfter: 12500 * time.Millisecond,
		PartitionKey: []byte("alice"),
	}
	h := http.Header{}
	for _, f := range v.Append(nil, header.All) {
		h.Set(f.Name, f.Value)
		fmt.Printf("%s: %s\n", f.Name, f.Value)
	}

	for _, p := range header.ParsePolicies(h.Values("RateLimit-Policy")) {
		fmt.Printf("policy %s: %d %s per %v for %s\n", p.Name, p.Quota, p.QuotaUnit, p.Window, p.PartitionKey)
	}
	for _, it := range header.ParseRateLimit(h.Values("RateLimit")) {
		fmt.Printf("%s: %d left for %v\n", it.Name, it.Remaining, it.Reset)
	}
	if d, ok := header.ParseRetryAfter(h.Get("Retry-After"), time.Now()); ok {
		fmt.Println("retry after", d)
	}
	if l, ok := header.ParseLegacy(h); ok {
		fmt.Printf("legacy: %d of %d, reset in %v\n", l.Remaining, l.Limit, l.Reset)
	}
	// Output:
	// RateLimit-Policy: "per_minute";q=100;w=60;pk=:YWxpY2U=:
	// RateLimit: "per_minute";r=0;t=13;pk=:YWxpY2U=:
	// X-RateLimit-Limit: 100
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 13
	// Retry-After: 13
	// policy per_minute: 100 requests per 1m0s for alice
	// per_minute: 0 left for 13s
	// retry after 13s
	// legacy: 0 of 100, reset in 13s
}

// A denial answered to a client that prefers problem details.
func ExampleWriteDenied() {
	v := header.Values{Policy: "per_minute", Limit: 100, Window: time.Minute, Reset: 12 * time.Second, RetryAfter: 12 * time.Second}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Accept", "application/problem+json, application/json;q=0.9")
	w := httptest.NewRecorder()
	header.WriteDenied(w, r, v, header.IETF, `over the limit "per_minute"`)
	fmt.Println(w.Code, w.Header().Get("Content-Type"), w.Header().Get("Retry-After"))
	fmt.Print(w.Body)
	// Output:
	// 429 application/problem+json 12
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"over the limit \"per_minute\"","violated-policies":["per_minute"],"retry_after":12}
}

// The fields of a pro plan's token bucket, 50 a minute with bursts of
// 100, after its first request: the quota is the burst, over the 120 s an
// empty bucket takes to refill.
func ExampleForLimit() {
	pro := bouncer.Limit{Name: "pro", Algorithm: bouncer.TokenBucket, Rate: 50, Period: time.Minute, Burst: 100}
	d := bouncer.Decision{Allowed: true, Capacity: 100, Remaining: 99, ResetAfter: 1200 * time.Millisecond}
	for _, f := range header.ForLimit(pro.Name, pro).Decided(d).Append(nil, header.All) {
		fmt.Printf("%s: %s\n", f.Name, f.Value)
	}
	// Output:
	// RateLimit-Policy: "pro";q=100;w=120
	// RateLimit: "pro";r=99;t=2
	// X-RateLimit-Limit: 100
	// X-RateLimit-Remaining: 99
	// X-RateLimit-Reset: 2
}
