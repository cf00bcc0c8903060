package route

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// A FieldError is one problem of the routes given to New: Field, a Go
// selector from routes[Route] ("PathPrefix", "Upstreams[1]",
// "Health.Path"), is wrong, for the reason Err gives. New's error joins
// one per problem (errors.Join), so that a config file can point at the
// line of each.
type FieldError struct {
	Route int
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// validate checks routes, returning every problem found, each naming the
// route and the field.
func validate(routes []Route) error {
	var errs []error
	names := make(map[string]bool, len(routes))
	type place struct{ host, prefix string }
	places := make(map[place]string, len(routes))
	for i, r := range routes {
		bad := func(field, format string, args ...any) {
			who := fmt.Sprintf("route %q", r.Name)
			if r.Name == "" {
				who = fmt.Sprintf("routes[%d]", i)
			}
			errs = append(errs, &FieldError{Route: i, Field: field, Err: fmt.Errorf("route: %s: %s", who, fmt.Sprintf(format, args...))})
		}
		switch {
		case r.Name == "":
			bad("Name", "Name is required")
		case names[r.Name]:
			bad("Name", "Name is used by an earlier route")
		}
		names[r.Name] = true
		if err := checkHost(r.Host); err != nil {
			bad("Host", "Host %q: %v", r.Host, err)
		}
		if err := checkPath(r.PathPrefix); err != nil {
			bad("PathPrefix", "PathPrefix %q: %v", r.PathPrefix, err)
		}
		p := place{strings.ToLower(r.Host), r.PathPrefix}
		if other, ok := places[p]; ok {
			bad("PathPrefix", "Host %q and PathPrefix %q are those of route %q", r.Host, r.PathPrefix, other)
		} else {
			places[p] = r.Name
		}
		validateFields(r, bad)
	}
	return errors.Join(errs...)
}

// validateFields checks the fields of r that no other route's bear on.
func validateFields(r Route, bad func(field, format string, args ...any)) {
	if len(r.Upstreams) == 0 {
		bad("Upstreams", "Upstreams: at least one is required")
	}
	for j, s := range r.Upstreams {
		if _, _, err := parseUpstream(s); err != nil {
			bad(fmt.Sprintf("Upstreams[%d]", j), "Upstreams[%d] %q: %v", j, s, err)
		}
	}
	if r.Timeout < 0 {
		bad("Timeout", "Timeout %v is negative", r.Timeout)
	}
	if r.Retries < 0 {
		bad("Retries", "Retries %d is negative", r.Retries)
	}
	if r.Eject.Duration < 0 {
		bad("Eject.Duration", "Eject.Duration %v is negative", r.Eject.Duration)
	}
	h := r.Health
	if h == nil {
		return
	}
	if !strings.HasPrefix(h.Path, "/") {
		bad("Health.Path", "Health.Path %q: must start with \"/\"", h.Path)
	} else if _, err := url.ParseRequestURI(h.Path); err != nil {
		bad("Health.Path", "Health.Path %q: %v", h.Path, errors.Unwrap(err))
	}
	for _, f := range []struct {
		name string
		neg  bool
		v    any
	}{
		{"Interval", h.Interval < 0, h.Interval},
		{"Timeout", h.Timeout < 0, h.Timeout},
		{"Healthy", h.Healthy < 0, h.Healthy},
		{"Unhealthy", h.Unhealthy < 0, h.Unhealthy},
	} {
		if f.neg {
			bad("Health."+f.name, "Health.%s %v is negative", f.name, f.v)
		}
	}
}

// checkHost accepts "", a host name or IP address, or "*." and a host
// name.
func checkHost(h string) error {
	if h == "" {
		return nil
	}
	name, wild := strings.CutPrefix(h, "*.")
	if !wild {
		if ip := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"); net.ParseIP(ip) != nil {
			return nil
		}
	}
	if strings.Contains(name, "*") {
		return errors.New(`a wildcard is allowed only as a leading "*."`)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("has an empty label")
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("has %q: a host name has letters, digits, '-', '_' and dots (and no port)", c)
			}
		}
	}
	return nil
}

// checkPath accepts a canonical absolute path (package urlpath); a
// trailing "/" is allowed.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New(`must start with "/"`)
	}
	if strings.ContainsAny(p, "?#") {
		return errors.New("must not have a query or fragment")
	}
	c, err := urlpath.Canonical(p)
	if err != nil {
		return err
	}
	if c != p {
		return fmt.Errorf("is not canonical: write %q", c)
	}
	return nil
}

// parseUpstream parses an upstream's URL. An h2c URL comes back with
// scheme http, and h2c set.
func parseUpstream(s string) (u *url.URL, h2c bool, err error) {
	u, err = url.Parse(s)
	if err != nil {
		return nil, false, errors.Unwrap(err) // the *url.Error repeats s
	}
	switch u.Scheme {
	case "http", "https":
	case "h2c":
		u.Scheme, h2c = "http", true
	default:
		return nil, false, fmt.Errorf("scheme %q is not http, https or h2c", u.Scheme)
	}
	switch {
	case u.Host == "" || u.Opaque != "":
		return nil, false, errors.New("has no host")
	case u.User != nil:
		return nil, false, errors.New("must not have user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, false, errors.New("must not have a query or fragment")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, h2c, nil
}
