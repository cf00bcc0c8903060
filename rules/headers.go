package rules

import (
	"fmt"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/header"
)

// Headers returns the rate-limit headers that describe r, from its binding
// status, under mode; none when no descriptor had a limit.
func (r *Response) Headers(mode header.Mode) []header.Field {
	v, ok := r.Values()
	if !ok {
		return nil
	}
	return v.Append(nil, mode)
}

// Values returns what the rate-limit headers of r report: its binding
// status, through header.ForLimit and header.Values.Decided, as every
// writer reports a limit. It reports false when no descriptor had a
// limit.
func (r *Response) Values() (header.Values, bool) {
	if r.Binding < 0 || r.Statuses[r.Binding].Limit == nil {
		return header.Values{}, false
	}
	st := &r.Statuses[r.Binding]
	name := st.Limit.Name
	if name == "" {
		name = limitName("", st.Limit.Unit)
	}
	d := bouncer.Decision{
		Allowed:   r.Code != OverLimit,
		Remaining: int64(st.Remaining), ResetAfter: st.ResetAfter, RetryAfter: st.RetryAfter,
	}
	return header.ForLimit(name, st.decided()).Decided(d), true
}

// decided is the limit st's headers describe: Decided, or the fixed
// window of Limit.
func (st *Status) decided() bouncer.Limit {
	if st.Decided.Algorithm.Valid() {
		return st.Decided
	}
	l := st.Limit
	window := l.Window
	if window == 0 {
		window = l.Unit.Duration()
	}
	return bouncer.Limit{Name: l.Name, Algorithm: bouncer.FixedWindow, Rate: int64(l.RequestsPerUnit), Period: window}
}

// DenialMessage is the message of the body of a denied r: "over the limit
// \"<name>\"", naming the binding limit, or header.DefaultMessage ("over
// the limit") when that limit has no name.
func (r *Response) DenialMessage() string {
	if r.Binding >= 0 {
		if l := r.Statuses[r.Binding].Limit; l != nil && l.Name != "" {
			return fmt.Sprintf("over the limit %q", l.Name)
		}
	}
	return header.DefaultMessage
}
