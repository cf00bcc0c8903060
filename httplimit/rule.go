package httplimit

import "github.com/bouncerhq/bouncer"

// Rule is one limit set of the middleware: whose requests count together
// (Key) and how many may pass (Limits, checked together).
type Rule struct {
	// Name names the rule in store keys, headers and logs. Required, and
	// unique among the middleware's rules.
	Name string

	// Key says whose count a request is charged to. Nil counts every
	// request under one key (Global).
	Key KeyFunc

	// Limits are checked all or nothing, together with the other rules'
	// (a request passes only if every rule allows it). A Concurrency limit
	// holds its units while the handler runs and gives them back when it
	// returns, panics or the client goes away; a shaping LeakyBucket holds
	// the request for its Delay instead of refusing it.
	Limits []bouncer.Limit

	// Shadow rules are checked and charged, and their denials logged and
	// reported to Options.Observe, but they never refuse a request nor
	// add headers: a way to try a rule on live traffic first.
	Shadow bool

	// RefundOn5xx gives the request's units back to the rule's limits
	// when the handler answers with a 5xx status: a failure of the
	// service is not charged to its client.
	RefundOn5xx bool

	// Usage, if not nil, meters the rule in a cost known only once the
	// response is written (Usage): a request reserves an estimate, which
	// is settled after the handler returns, in place of Options.Cost. Its
	// limits cannot be Concurrency limits nor shape.
	Usage *Usage
}
