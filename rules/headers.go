package rules

import "github.com/bouncerhq/bouncer/header"

// Headers returns the rate-limit headers that describe r, from its binding
// status, under mode; none when no descriptor had a limit.
func (r *Response) Headers(mode header.Mode) []header.Field {
	if r.Binding < 0 {
		return nil
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
	return v.Append(nil, mode)
}
