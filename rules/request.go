package rules

import (
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/internal/storekey"
)

// Bounds on a request, so that no client can make Bouncer do unbounded
// work or keep unbounded state. Values longer than MaxKeyPart are
// kept as a digest, never raw.
// MaxKeyPart is the longest escaped part of a store key kept as it is;
// longer parts become a digest.
const MaxKeyPart = storekey.MaxPart

const (
	MaxDescriptors = 64
	MaxEntries     = 32
	MaxKeyLen      = 256  // an entry's key, and the domain
	MaxValueLen    = 4096 // an entry's value
	MaxHits        = 1 << 40
)

// Request asks whether the hits of each descriptor may pass: the RLS
// ShouldRateLimit request, in transport-neutral form.
type Request struct {
	Domain      string
	Descriptors []Descriptor

	// HitsAddend is the request's cost, used by every descriptor that
	// sets none; 0 means 1, as in Envoy.
	HitsAddend uint64

	// Model is the model the request names, if known before it is
	// served: a priced rule reserves its descriptor's hits, an estimate
	// of tokens, at that model's highest price ("" or a model its table
	// does not list: the table's highest).
	Model string

	// Usage, when set, is what the request used, known already (a
	// report): each descriptor that sets no hits of its own is charged
	// its cost under a priced rule, and its tokens (Usage.Units) under
	// any other, instead of HitsAddend.
	Usage *Usage
}

// Descriptor is one descriptor of a request.
type Descriptor struct {
	Entries []Entry

	// Hits, when set, is this descriptor's cost instead of the
	// request's; 0 peeks.
	Hits *uint64

	// Limit, when set, overrides the config for this descriptor, as
	// Envoy's descriptor-level limit does.
	Limit *Override
}

// Override is a limit given with the request.
type Override struct {
	RequestsPerUnit uint32
	Unit            Unit
}

// EmptyRequestError is the error of a request with no domain or no
// descriptor. It wraps bouncer.ErrInvalidRequest, and its message is
// envoyproxy/ratelimit's own, so that the RLS service can answer it as
// that project does: status Unknown and the bare message.
type EmptyRequestError struct{ Msg string }

func (e *EmptyRequestError) Error() string { return e.Msg }

// Unwrap returns bouncer.ErrInvalidRequest.
func (e *EmptyRequestError) Unwrap() error { return bouncer.ErrInvalidRequest }

func (r *Request) validate() error {
	switch {
	case r.Domain == "":
		return &EmptyRequestError{Msg: "rate limit domain must not be empty"}
	case len(r.Domain) > MaxKeyLen:
		return fmt.Errorf("%w: domain longer than %d bytes", bouncer.ErrInvalidRequest, MaxKeyLen)
	case len(r.Descriptors) == 0:
		return &EmptyRequestError{Msg: "rate limit descriptor list must not be empty"}
	case len(r.Descriptors) > MaxDescriptors:
		return fmt.Errorf("%w: %d descriptors, at most %d", bouncer.ErrInvalidRequest, len(r.Descriptors), MaxDescriptors)
	case r.HitsAddend > MaxHits:
		return fmt.Errorf("%w: hits_addend %d above %d", bouncer.ErrInvalidRequest, r.HitsAddend, uint64(MaxHits))
	}
	for i, d := range r.Descriptors {
		if len(d.Entries) > MaxEntries {
			return fmt.Errorf("%w: descriptors[%d]: %d entries, at most %d", bouncer.ErrInvalidRequest, i, len(d.Entries), MaxEntries)
		}
		for j, e := range d.Entries {
			if len(e.Key) > MaxKeyLen {
				return fmt.Errorf("%w: descriptors[%d].entries[%d]: key longer than %d bytes", bouncer.ErrInvalidRequest, i, j, MaxKeyLen)
			}
			if len(e.Value) > MaxValueLen {
				return fmt.Errorf("%w: descriptors[%d].entries[%d]: value longer than %d bytes", bouncer.ErrInvalidRequest, i, j, MaxValueLen)
			}
		}
		if d.Hits != nil && *d.Hits > MaxHits {
			return fmt.Errorf("%w: descriptors[%d]: hits_addend %d above %d", bouncer.ErrInvalidRequest, i, *d.Hits, uint64(MaxHits))
		}
		if o := d.Limit; o != nil && o.Unit == UnitUnknown {
			return fmt.Errorf("%w: descriptors[%d].limit: unknown unit", bouncer.ErrInvalidRequest, i)
		}
	}
	return nil
}

// hits is descriptor i's cost.
// cost is descriptor i's cost under rule: its hits, or its usage's
// tokens; under a priced rule, money: the usage's cost, or its hits
// reserved at the model's highest price.
func (r *Request) cost(i int, rule *Rule) int64 {
	if r.Usage != nil && r.Descriptors[i].Hits == nil {
		if rule != nil && rule.Prices != nil {
			return rule.Prices.Cost(*r.Usage)
		}
		return r.Usage.Units()
	}
	n := r.hits(i)
	if rule != nil && rule.Prices != nil && n > 0 {
		return max(rule.Prices.Reserve(n, r.Model), 1)
	}
	return n
}

func (r *Request) hits(i int) int64 {
	if h := r.Descriptors[i].Hits; h != nil {
		return int64(*h)
	}
	return int64(max(r.HitsAddend, 1))
}

// Code is a descriptor's or a response's verdict.
type Code uint8

const (
	OK Code = iota + 1
	OverLimit
)

func (c Code) String() string {
	if c == OverLimit {
		return "OVER_LIMIT"
	}
	return "OK"
}

// Response answers a Request: one Status per descriptor, in order.
type Response struct {
	// Code is OverLimit if any descriptor is over its limit (shadow
	// rules never are).
	Code     Code
	Statuses []Status

	// Binding is the index of the status rate-limit headers report: an
	// over-limit one, else the one with the least remaining; -1 when no
	// descriptor had a limit.
	Binding int

	// charges are what Decide charged through lim; Ledger moves them
	// into ledger.
	charges []bouncer.Charge
	lim     bouncer.Limiter
	ledger  *bouncer.Ledger
	domain  *Domain
}

// Prices returns the price table of the charges of r's ledger with
// meter (bouncer.Charge.Meter): nil for meter 0, whose charges count
// units. A caller settling the ledger charges those at the table's cost
// of the usage.
func (r *Response) Prices(meter int) *Prices { return r.Pricing().Prices(meter) }

// Pricing returns r's price tables as a value to keep until the request
// is settled, apart from r.
func (r *Response) Pricing() Pricing { return Pricing{r.domain} }

// Pricing is the price tables of a response's meters (Response.Pricing).
type Pricing struct{ d *Domain }

// Prices is Response.Prices.
func (p Pricing) Prices(meter int) *Prices {
	if p.d == nil || meter < 1 || meter > len(p.d.prices) {
		return nil
	}
	return p.d.prices[meter-1]
}

// Delay is how long the caller should hold an allowed request before it
// proceeds: the longest Delay of its statuses, leaving out those of shadow
// and quota-mode rules, which never hold a request back. It is 0 for a
// denied request, which is not held but answered.
func (r *Response) Delay() time.Duration {
	if r.Code == OverLimit {
		return 0
	}
	var d time.Duration
	for i := range r.Statuses {
		st := &r.Statuses[i]
		if st.Rule != nil && (st.Rule.Shadow || st.Rule.QuotaMode) {
			continue
		}
		d = max(d, st.Delay)
	}
	return d
}

// Degraded reports whether any descriptor was decided without the
// shared store (Status.Degraded).
func (r *Response) Degraded() bool {
	for i := range r.Statuses {
		if r.Statuses[i].Degraded {
			return true
		}
	}
	return false
}

// DegradedHeader is header.Degraded, the field that marks an answer with a
// descriptor decided without the shared store, under the name rules gave
// it first; new code names header.Degraded.
const DegradedHeader = header.Degraded

// Status is one descriptor's answer.
type Status struct {
	Code Code

	// Rule is the rule that applied; nil when none did, or when the
	// request overrode the limit.
	Rule *Rule

	// Limit is the limit reported (RLS current_limit); nil when none
	// applies, and for unlimited rules.
	Limit *CurrentLimit

	// Decided is the limit that decided the descriptor (its binding
	// limit), which the rate-limit headers describe (Response.Values). It
	// is the zero Limit for a limit of 0 and under envoyproxy/ratelimit's
	// semantics, whose limits are the fixed windows Limit describes:
	// RequestsPerUnit per Window.
	Decided bouncer.Limit

	// Remaining is what the limit still admits; the uint32 maximum for
	// unlimited rules.
	Remaining uint32

	// ResetAfter is how long until the limit is full again (or its
	// window resets); RetryAfter how long until a request of the same
	// cost would pass (bouncer.Never if it never can), 0 when allowed.
	ResetAfter time.Duration
	RetryAfter time.Duration

	// Delay is how long an allowed descriptor's request should wait
	// before it proceeds, so that shaped requests leave at a steady rate
	// (bouncer.Decision.Delay): only a shaping leaky bucket sets it. Under
	// Bouncer semantics it is the delay of the check of the descriptor's
	// group; 0 when the descriptor is over its limit or its cost is 0.
	// Neither RLS nor the JSON API carries it; Response.Delay is what a
	// caller that can hold requests waits.
	Delay time.Duration

	// Shadowed reports an over-limit answer turned into OK by a shadow
	// (or quota-mode) rule; Unlimited an unlimited rule; Degraded a
	// decision made without the shared store (its failure policy).
	Shadowed  bool
	Unlimited bool
	Degraded  bool

	// Key is the store key the descriptor was counted under.
	Key string

	// Hits is what the descriptor asked to count: its own hits_addend,
	// else the request's (0 meaning 1); 0 for a descriptor that peeks.
	Hits uint64

	// Budget, for a priced rule's descriptor, is its binding limit in
	// money: what is left of it and its whole, in micro-units of
	// Prices.Currency. The zero Budget (no Currency) for other rules.
	Budget Budget
}

// Budget returns the least budget left among r's statuses of priced
// rules (see Status.Budget), nil when none is priced: what the gateway's
// X-Budget-Remaining header states.
func (r *Response) Budget() *Budget {
	var least *Budget
	for i := range r.Statuses {
		if b := &r.Statuses[i].Budget; b.Currency != "" && (least == nil || b.Remaining < least.Remaining) {
			least = b
		}
	}
	return least
}

// Budget is a priced limit's state in money, in micro-units of its
// currency (FormatMoney writes them).
type Budget struct {
	Currency         string
	Remaining, Limit int64
}

// CurrentLimit is a limit as a response reports it.
type CurrentLimit struct {
	Name            string
	RequestsPerUnit uint32
	Unit            Unit          // UnitUnknown when Window is not one
	Window          time.Duration // the limit's period
}
