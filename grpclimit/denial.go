package grpclimit

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
)

// denial is the status of a call that rule refused, with v the binding
// limit's values: ResourceExhausted, a RetryInfo with the exact retry
// delay (none when no wait would help, v.RetryAfter being bouncer.Never),
// and a QuotaFailure naming the rule and its policy. The details say
// nothing of the key, which may hold what the client sent.
func denial(rule string, v header.Values) *status.Status {
	s := status.New(codes.ResourceExhausted, "rate limit exceeded: "+v.Policy)
	q := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     rule,
		Description: describe(v),
		QuotaId:     v.Policy,
		QuotaValue:  v.Limit,
	}}}
	var err error
	var d *status.Status
	if v.RetryAfter == bouncer.Never {
		d, err = s.WithDetails(q)
	} else {
		d, err = s.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(v.RetryAfter)}, q)
	}
	if err != nil {
		return s // details of a known type always marshal
	}
	return d
}

// describe says which quota v's call exceeded, as the headers give it
// (header.ForLimit): "3 requests per 1m0s", "20 requests per 2s" (a
// bucket's burst over its refill time), "10 concurrent-requests".
func describe(v header.Values) string {
	unit := v.QuotaUnit
	if unit == "" {
		unit = header.DefaultQuotaUnit
	}
	if v.RetryAfter == bouncer.Never {
		return fmt.Sprintf("the call costs more than the quota of %d %s", v.Limit, unit)
	}
	if v.Window > 0 {
		return fmt.Sprintf("%d %s per %v", v.Limit, unit, v.Window)
	}
	return fmt.Sprintf("%d %s", v.Limit, unit)
}
