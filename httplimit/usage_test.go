package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
	"github.com/bouncerhq/bouncer/internal/edgetest"
)

// streaming answers in chunks and reports the tokens it used, the
// request's X-Want, in the trailer X-Usage-Tokens, as an LLM API
// streaming a completion does; it counts the requests it serves.
func streaming(served *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Trailer", "X-Usage-Tokens")
		for range 3 {
			io.WriteString(w, "token ")
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Usage-Tokens", r.Header.Get("X-Want"))
	})
}

func TestUsageSettlesTheActualCost(t *testing.T) {
	tokens := func(u httplimit.Usage) []httplimit.Rule {
		return []httplimit.Rule{{Name: "tokens", Key: httplimit.Header("X-Key"), Limits: []bouncer.Limit{perMinute("m", 100)}, Usage: &u}}
	}
	trailerUsage := httplimit.Usage{Estimate: httplimit.EstimateHeader("X-Estimate"), Actual: httplimit.ActualHeader("X-Usage-Tokens")}
	type step struct {
		estimate, want string // request headers; "" sends none
		status         int
		used           int64 // what the key's limit holds after
	}
	for _, tc := range []struct {
		name    string
		usage   httplimit.Usage
		handler func(*atomic.Int64) http.Handler
		steps   []step
	}{
		{
			name:  "a client that states a small estimate is charged what it used, past the limit, then refused",
			usage: trailerUsage, handler: streaming,
			steps: []step{
				{estimate: "1", want: "80", status: 200, used: 80},
				{estimate: "1", want: "70", status: 200, used: 150},
				{estimate: "1", want: "5", status: 429, used: 150}, // in debt: refused, never settled
			},
		},
		{
			name:  "the unused part of an estimate is given back",
			usage: trailerUsage, handler: streaming,
			steps: []step{
				{estimate: "90", want: "10", status: 200, used: 10},
				{estimate: "90", want: "0", status: 200, used: 10},
			},
		},
		{
			name:  "an estimate over what is left is refused up front",
			usage: trailerUsage, handler: streaming,
			steps: []step{
				{estimate: "60", want: "60", status: 200, used: 60},
				{estimate: "60", want: "1", status: 429, used: 60},
			},
		},
		{
			name:  "no estimate reserves 1",
			usage: trailerUsage, handler: streaming,
			steps: []step{{want: "7", status: 200, used: 7}},
		},
		{
			name:  "no usage reported: the estimate stands",
			usage: trailerUsage, handler: streaming,
			steps: []step{{estimate: "30", status: 200, used: 30}},
		},
		{
			name:  "an estimate that is not a count is the client's fault",
			usage: trailerUsage, handler: streaming,
			steps: []step{{estimate: "lots", want: "5", status: 400, used: 0}},
		},
		{
			name:  "a usage header rather than a trailer",
			usage: httplimit.Usage{Estimate: httplimit.EstimateCost(10), Actual: httplimit.ActualHeader("X-Usage-Tokens")},
			handler: func(served *atomic.Int64) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served.Add(1)
					w.Header().Set("X-Usage-Tokens", r.Header.Get("X-Want"))
					io.WriteString(w, "done")
				})
			},
			steps: []step{{want: "25", status: 200, used: 25}},
		},
		{
			name:  "the bytes written",
			usage: httplimit.Usage{Estimate: httplimit.EstimateCost(10), Actual: httplimit.ActualBytes},
			handler: func(served *atomic.Int64) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served.Add(1)
					n, _ := strconv.Atoi(r.Header.Get("X-Want"))
					io.WriteString(w, strings.Repeat("x", n))
				})
			},
			steps: []step{{want: "64", status: 200, used: 64}, {want: "64", status: 200, used: 128}, {want: "1", status: 429, used: 128}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &edgetest.Ledger{}
			var served atomic.Int64
			srv := serve(t, l, tokens(tc.usage), httplimit.Options{}, tc.handler(&served))
			var wantServed int64
			for i, s := range tc.steps {
				var hdr []string
				if s.estimate != "" {
					hdr = append(hdr, "X-Estimate", s.estimate)
				}
				if s.want != "" {
					hdr = append(hdr, "X-Want", s.want)
				}
				a := get(t, srv, "/", append(hdr, "X-Key", "k1")...)
				if a.status != s.status {
					t.Fatalf("step %d: status %d, want %d (%s)", i, a.status, s.status, a.body)
				}
				if s.status == 200 {
					wantServed++
				}
				if served.Load() != wantServed {
					t.Errorf("step %d: handler served %d requests, want %d", i, served.Load(), wantServed)
				}
				if got := l.Used("tokens:k1", "m"); got != s.used {
					t.Errorf("step %d: %d units charged, want %d", i, got, s.used)
				}
			}
		})
	}
}

func TestUsageRulesAndRequestRulesCountApart(t *testing.T) {
	l := &edgetest.Ledger{}
	rules := []httplimit.Rule{
		{Name: "requests", Limits: []bouncer.Limit{perMinute("m", 3)}},
		{Name: "tokens", Limits: []bouncer.Limit{perMinute("m", 1000)}, Usage: &httplimit.Usage{
			Estimate: httplimit.EstimateHeader("X-Estimate"), Actual: httplimit.ActualHeader("X-Usage-Tokens"),
		}},
	}
	var served atomic.Int64
	srv := serve(t, l, rules, httplimit.Options{}, streaming(&served))
	for i, want := range []int{200, 200, 200, 429} {
		if a := get(t, srv, "/", "X-Estimate", "50", "X-Want", "100"); a.status != want {
			t.Fatalf("request %d: status %d, want %d", i, a.status, want)
		}
	}
	if got := l.Used("requests:", "m"); got != 3 {
		t.Errorf("requests rule: %d charged, want 3 (one a request)", got)
	}
	if got := l.Used("tokens:", "m"); got != 300 {
		t.Errorf("tokens rule: %d charged, want 300 (what was used; the refused request reserved nothing)", got)
	}

	// When the tokens rule refuses, the requests rule is not charged.
	l2 := &edgetest.Ledger{}
	srv = serve(t, l2, rules, httplimit.Options{}, streaming(&served))
	if a := get(t, srv, "/", "X-Estimate", "5000"); a.status != http.StatusTooManyRequests {
		t.Fatalf("an estimate over the tokens limit: status %d, want 429", a.status)
	}
	if got := l2.Used("requests:", "m"); got != 0 {
		t.Errorf("requests rule after a refusal: %d charged, want 0 (all or nothing)", got)
	}
}

func TestUsageRuleCannotHoldLeasesOrShape(t *testing.T) {
	for _, l := range []bouncer.Limit{
		{Name: "c", Algorithm: bouncer.Concurrency, Rate: 5, Period: time.Minute},
		{Name: "s", Algorithm: bouncer.LeakyBucket, Rate: 5, Period: time.Second, Burst: 5, Shape: true},
	} {
		_, err := httplimit.Middleware(&edgetest.Ledger{}, []httplimit.Rule{{Name: "r", Limits: []bouncer.Limit{l}, Usage: &httplimit.Usage{}}}, httplimit.Options{})
		if err == nil || !strings.Contains(err.Error(), "settled after the fact") {
			t.Errorf("a metered rule with %s: err = %v, want one that says why", l.Algorithm, err)
		}
	}
}

// A token bucket of 100 tokens a minute on the memory store: a client
// that states an estimate of 1 and uses 150 goes into debt, is refused
// until time has paid it back, and comes back then.
func TestUsageDebtOnTheStore(t *testing.T) {
	s, clock := newStore(t)
	tokens := bouncer.Limit{Name: "tokens", Algorithm: bouncer.TokenBucket, Rate: 100, Period: time.Minute, Burst: 100}
	var served atomic.Int64
	srv := serve(t, s, []httplimit.Rule{{Name: "llm", Key: httplimit.Header("X-Key"), Limits: []bouncer.Limit{tokens},
		Usage: &httplimit.Usage{Estimate: httplimit.EstimateHeader("X-Estimate"), Actual: httplimit.ActualHeader("X-Usage-Tokens")}}},
		httplimit.Options{}, streaming(&served))
	ask := func(want string) answer {
		t.Helper()
		return get(t, srv, "/", "X-Key", "k1", "X-Estimate", "1", "X-Want", want)
	}
	if a := ask("80"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "99" {
		t.Fatalf("first: %d, remaining %s, want 200 and 99 (the headers show the reservation)", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	if a := ask("70"); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "19" {
		t.Fatalf("second: %d, remaining %s, want 200 and 19 (80 used, 1 reserved)", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	// 150 used of 100: a debt of 50. One token more takes 51 × 0.6 s.
	a := ask("1")
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "31" {
		t.Fatalf("in debt: %d, Retry-After %q, want 429 and 31", a.status, a.header.Get("Retry-After"))
	}
	clock.Advance(30 * time.Second)
	if a := ask("1"); a.status != http.StatusTooManyRequests {
		t.Fatalf("30 s later, the debt just paid: %d, want 429", a.status)
	}
	clock.Advance(time.Second)
	if a := ask("1"); a.status != 200 {
		t.Fatalf("31 s later: %d, want 200", a.status)
	}
	if served.Load() != 3 {
		t.Errorf("the handler served %d requests, want 3 (refused ones never reach it)", served.Load())
	}
}

func TestUsageWithRefundsAndShadows(t *testing.T) {
	usage := &httplimit.Usage{Estimate: httplimit.EstimateCost(10), Actual: httplimit.ActualHeader("X-Usage-Tokens")}
	answer := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Usage-Tokens", "40")
			w.WriteHeader(status)
		})
	}
	for _, tc := range []struct {
		name   string
		rule   httplimit.Rule
		status int
		used   int64
	}{
		{"a 5xx gives back what was settled", httplimit.Rule{RefundOn5xx: true}, 500, 0},
		{"a 4xx is charged what it used", httplimit.Rule{RefundOn5xx: true}, 404, 40},
		{"a shadow rule is settled too", httplimit.Rule{Shadow: true}, 200, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &edgetest.Ledger{}
			r := tc.rule
			r.Name, r.Limits, r.Usage = "tokens", []bouncer.Limit{perMinute("m", 100)}, usage
			srv := serve(t, l, []httplimit.Rule{r}, httplimit.Options{Logger: discard()}, answer(tc.status))
			if a := get(t, srv, "/"); a.status != tc.status {
				t.Fatalf("status %d, want %d", a.status, tc.status)
			}
			if got := l.Used("tokens:", "m"); got != tc.used {
				t.Errorf("%d charged, want %d", got, tc.used)
			}
		})
	}
}

// A client that goes away frees its request's leases at once, on another
// goroutine, while the handler goes on and is settled when it returns.
func TestUsageClientGoesAway(t *testing.T) {
	l := &edgetest.Ledger{}
	started, finished := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-First") == "" {
			return
		}
		close(started)
		<-r.Context().Done()
		w.Header().Set("X-Usage-Tokens", "30")
		defer close(finished)
	})
	rules := []httplimit.Rule{
		{Name: "inflight", Limits: []bouncer.Limit{{Name: "c", Algorithm: bouncer.Concurrency, Rate: 1, Period: time.Minute}}},
		{Name: "tokens", Limits: []bouncer.Limit{perMinute("m", 100)}, Usage: &httplimit.Usage{Actual: httplimit.ActualHeader("X-Usage-Tokens")}},
	}
	srv := serve(t, l, rules, httplimit.Options{Logger: discard()}, h)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("X-First", "1")
	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	<-errc
	<-finished
	// The handler has returned; the middleware settles right after it,
	// so poll with a deadline rather than assume it is done.
	deadline := time.Now().Add(10 * time.Second)
	for l.Used("tokens:", "m") != 30 || l.Used("inflight:", "c") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tokens %d, leases %d; want 30 and 0", l.Used("tokens:", "m"), l.Used("inflight:", "c"))
		}
		time.Sleep(time.Millisecond)
	}
	if a := get(t, srv, "/"); a.status != 200 {
		t.Errorf("the next request: %d, want 200 (the lease is back)", a.status)
	}
}
