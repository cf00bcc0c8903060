package rls_test

import (
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// Envoy's apply_on_stream_done sends a request when the stream ends,
// with the hits the response reported (hits_addend), and ignores the
// answer. Nothing in the request marks it: envoyproxy/ratelimit adds
// every request's hits to the count (INCRBY) whatever the count holds,
// and answers OVER_LIMIT once it is past the limit. The answers below
// are the reference's for the same sequence, under its own config
// format.
func TestStreamDoneHitsAreCounted(t *testing.T) {
	c, err := rules.Parse("llm.yaml", []byte(`domain: llm
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	s := rls.New(e, header.All)
	const ok, over = pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT
	for i, step := range []struct {
		advance   time.Duration
		hits      uint64 // the request's hits_addend; 0 sends none (1)
		descHits  *uint64
		code      pb.RateLimitResponse_Code
		remaining uint32
	}{
		{hits: 0, code: ok, remaining: 99},                       // the request path: 1
		{hits: 80, code: ok, remaining: 19},                      // its stream ends: 80 tokens
		{hits: 0, code: ok, remaining: 18},                       // the next request
		{hits: 70, code: over, remaining: 0},                     // its stream ends past the limit: counted all the same
		{hits: 0, code: over, remaining: 0},                      // the next request is refused
		{descHits: new(uint64), code: over},                      // and so is a look (hits_addend 0 on the descriptor)
		{advance: time.Minute, hits: 0, code: ok, remaining: 99}, // the next window
	} {
		clock.Advance(step.advance)
		d := &rlpb.RateLimitDescriptor{Entries: entries("api_key=k1")}
		if step.descHits != nil {
			d.HitsAddend = wrapperspb.UInt64(*step.descHits)
		}
		resp, err := s.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "llm", HitsAddend: uint32(step.hits), Descriptors: []*rlpb.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != step.code || st.GetLimitRemaining() != step.remaining {
			t.Errorf("step %d: %v with %d remaining, want %v with %d", i, resp.GetOverallCode(), st.GetLimitRemaining(), step.code, step.remaining)
		}
	}
}
