package grpclimit

import "github.com/bouncerhq/bouncer"

// Rule is one limit set of the interceptors: whose calls count together
// (Key) and how many may pass (Limits, checked together).
type Rule struct {
	// Name names the rule in store keys, metadata, status details and
	// logs. Required, and unique among the interceptors' rules.
	Name string

	// Key says whose count a call is charged to. Nil counts every call
	// under one key (Global).
	Key KeyFunc

	// Limits are checked all or nothing, together with the other rules'
	// (a call passes only if every rule allows it). A stream is one call:
	// it is charged once, when it opens. A Concurrency limit holds its
	// units while the handler runs (for a stream, while it lives) and
	// gives them back when the handler returns, panics or the client goes
	// away; a shaping LeakyBucket holds the call for its Delay instead of
	// refusing it.
	Limits []bouncer.Limit

	// Shadow rules are checked and charged, and their denials logged and
	// reported to Options.Observe, but they never refuse a call nor add
	// metadata: a way to try a rule on live traffic first.
	Shadow bool

	// RefundOnError gives the call's units back to the rule's limits when
	// the handler fails on the server's side: it returns a status whose
	// code is Internal, Unavailable, Unknown (any error that is not a
	// status), DataLoss or DeadlineExceeded, or it panics. A failure of
	// the service is not charged to its client; a refusal of the client's
	// call (InvalidArgument, NotFound, PermissionDenied...) is.
	RefundOnError bool

	// Usage, if not nil, meters the rule in a cost known only once the
	// call has been served (Usage): a call reserves an estimate, which is
	// settled after the handler returns, in place of Options.Cost. Its
	// limits cannot be Concurrency limits nor shape.
	Usage *Usage
}
