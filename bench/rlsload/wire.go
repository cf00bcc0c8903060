package rlsload

import (
	"fmt"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	guber "github.com/gubernator-io/gubernator/v2"
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

	guberRespResponses = 1 // GetRateLimitsResp.responses
	guberRespStatus    = 1 // RateLimitResp.status
	guberRespLimit     = 2 // RateLimitResp.limit
	guberRespError     = 5 // RateLimitResp.error
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

// judgeGubernatorWire judges a marshalled GetRateLimitsResp as
// newGubernator's judge does the message: want responses, each without
// error and with limit as its limit.
func judgeGubernatorWire(b []byte, want int, limit int64) (outcome, error) {
	o := allowed
	var first error // the first response's failure
	count := 0
	for len(b) > 0 {
		num, typ, _, sub, n, err := wireField(b)
		if err != nil {
			return failed, err
		}
		b = b[n:]
		if num != guberRespResponses || typ != protowire.BytesType {
			continue
		}
		count++
		var st guber.Status
		var lim int64
		var errStr []byte
		for len(sub) > 0 {
			num, typ, v, s, n, err := wireField(sub)
			if err != nil {
				return failed, err
			}
			sub = sub[n:]
			switch {
			case num == guberRespStatus && typ == protowire.VarintType:
				st = guber.Status(int32(v))
			case num == guberRespLimit && typ == protowire.VarintType:
				lim = int64(v)
			case num == guberRespError && typ == protowire.BytesType:
				errStr = s
			}
		}
		if first != nil {
			continue
		}
		switch {
		case len(errStr) > 0:
			first = fmt.Errorf("rlsload: gubernator: %s", errStr)
		case lim != limit:
			first = fmt.Errorf("rlsload: limit %d in the answer, want %d", lim, limit)
		case st == guber.Status_OVER_LIMIT:
			o = denied
		}
	}
	if count != want {
		return failed, fmt.Errorf("rlsload: %d rate limit responses, want %d", count, want)
	}
	if first != nil {
		return failed, first
	}
	return o, nil
}
