package rlqs

import (
	"math"
	"time"

	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// assignment is a token bucket that admits rate per second, rounded down
// (to the nanosecond of its fill interval) so that a fleet's buckets never
// add up to more than their shares: a fill of at least one token and at
// least 50 ms, which suits a bucket refilled continuously and one refilled
// a fill at a time alike. It holds burst seconds of tokens, a fill at
// least. A rate of 0 is a blanket DENY_ALL.
func assignment(rate float64, burst time.Duration) *typepb.RateLimitStrategy {
	if rate <= 0 {
		return denyAll
	}
	tokens := min(max(math.Ceil(rate*0.05), 1), math.MaxUint32)
	fill := time.Duration(math.Ceil(tokens / rate * float64(time.Second)))
	maxTokens := min(max(math.Floor(rate*burst.Seconds()), tokens), math.MaxUint32)
	return &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_TokenBucket{TokenBucket: &typepb.TokenBucket{
		MaxTokens:     uint32(maxTokens),
		TokensPerFill: wrapperspb.UInt32(uint32(tokens)),
		FillInterval:  durationpb.New(fill),
	}}}
}

// allowAll and denyAll are the blanket assignments.
var (
	allowAll = &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_ALLOW_ALL}}
	denyAll  = &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_DENY_ALL}}
)
