package rlsload

import (
	"fmt"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// The lean client judges answers from their wire form, reading only the
// fields the judges of rls.go and gubernator.go read, with the same
// verdicts and errors: unmarshalling into the generated types would cost
// it a third of its CPU. Fields are read as proto does: the last value
// of a scalar wins, a message field given twice is merged, and fields of
// other numbers or wire types are skipped. Strings are not checked for
// UTF-8.

// Field numbers (checked against the generated descriptors by
// TestWireFieldNumbers).
const (
	rlsRespOverallCode      = 1 // RateLimitResponse.overall_code
	rlsRespStatuses         = 2 // RateLimitResponse.statuses
	rlsStatusCurrentLimit   = 2 // DescriptorStatus.current_limit
	rlsLimitRequestsPerUnit = 1 // RateLimit.requests_per_unit
)

// wireField consumes the field at the start of b and returns its number,
// wire type, value (for a varint), contents (for bytes) and length.
func wireField(b []byte) (num protowire.Number, typ protowire.Type, v uint64, sub []byte, n int, err error) {
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, nil, 0, fmt.Errorf("rlsload: bad answer: %w", protowire.ParseError(n))
	}
	var m int
	switch typ {
	case protowire.VarintType:
		v, m = protowire.ConsumeVarint(b[n:])
	case protowire.BytesType:
		sub, m = protowire.ConsumeBytes(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return 0, 0, 0, nil, 0, fmt.Errorf("rlsload: bad answer: %w", protowire.ParseError(m))
	}
	return num, typ, v, sub, n + m, nil
}

// judgeRLSWire judges a marshalled RateLimitResponse as newRLS's judge
// does the message: want statuses, each with a current limit of limit
// requests per unit if limit > 0.
func judgeRLSWire(b []byte, want int, limit int64) (outcome, error) {
	var overall int32
	statuses := 0
	var badLimit uint32
	bad := false
	for len(b) > 0 {
		num, typ, v, sub, n, err := wireField(b)
		if err != nil {
			return failed, err
		}
		b = b[n:]
		switch {
		case num == rlsRespOverallCode && typ == protowire.VarintType:
			overall = int32(v)
		case num == rlsRespStatuses && typ == protowire.BytesType:
			rpu, err := rlsStatusLimit(sub)
			if err != nil {
				return failed, err
			}
			if limit > 0 && !bad && int64(rpu) != limit {
				bad, badLimit = true, rpu
			}
			statuses++
		}
	}
	if statuses != want {
		return failed, fmt.Errorf("rlsload: %d descriptor statuses, want %d", statuses, want)
	}
	if bad {
		return failed, fmt.Errorf("rlsload: descriptor's current limit is %d requests per unit, want %d", badLimit, limit)
	}
	switch code := rlspb.RateLimitResponse_Code(overall); code {
	case rlspb.RateLimitResponse_OK:
		return allowed, nil
	case rlspb.RateLimitResponse_OVER_LIMIT:
		return denied, nil
	default:
		return failed, fmt.Errorf("rlsload: overall code %v", code)
	}
}

// rlsStatusLimit returns the requests_per_unit of a DescriptorStatus's
// current_limit (0 if none).
func rlsStatusLimit(b []byte) (uint32, error) {
	var rpu uint32
	for len(b) > 0 {
		num, typ, _, sub, n, err := wireField(b)
		if err != nil {
			return 0, err
		}
		b = b[n:]
		if num != rlsStatusCurrentLimit || typ != protowire.BytesType {
			continue
		}
		for len(sub) > 0 {
			num, typ, v, _, n, err := wireField(sub)
			if err != nil {
				return 0, err
			}
			sub = sub[n:]
			if num == rlsLimitRequestsPerUnit && typ == protowire.VarintType {
				rpu = uint32(v)
			}
		}
	}
	return rpu, nil
}
