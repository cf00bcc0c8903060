package rules

import (
	"fmt"

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
// status. It reports false when no descriptor had a limit. A denied
// status with no RetryAfter of its own reports its ResetAfter as
// RetryAfter.
func (r *Response) Values() (header.Values, bool) {
	if r.Binding < 0 || r.Statuses[r.Binding].Limit == nil {
		return header.Values{}, false
	}
	st := &r.Statuses[r.Binding]
	l := st.Limit
	window := l.Window
	if window == 0 {
		window = l.Unit.Duration()
	}
	name := l.Name
	if name == "" {
		name = limitName("", l.Unit)
	}
	v := header.Values{
		Policy: name, Limit: int64(l.RequestsPerUnit), Window: window,
		Remaining: int64(st.Remaining), Reset: st.ResetAfter,
		Denied: r.Code == OverLimit, RetryAfter: st.RetryAfter,
	}
	if v.Denied && v.RetryAfter == 0 {
		v.RetryAfter = st.ResetAfter
	}
	return v, true
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
