package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// check reports to ps what is wrong with c, as read from its file, that
// is the gateway's own to check: its settings, its limits, and the
// references between its parts. Each package checks its own part when
// New builds the gateway from c.
func check(c *Config, ps *problems) {
	errf := func(path, format string, args ...any) { ps.add(c.File, c.line(path), fmt.Sprintf(format, args...)) }
	if c.MaxBodyBytes < 0 {
		errf("", "max_body_bytes: must not be negative")
	}
	if len(c.Listeners) == 0 {
		errf("", "listeners: at least one is needed (listeners: [{addr: 127.0.0.1:8080}])")
	}
	for i, l := range c.Listeners {
		if l.Addr == "" {
			errf(fmt.Sprintf("listeners[%d]", i), "listeners[%d].addr: required", i)
		}
	}
	for name, a := range c.Auth {
		if (a.JWT == nil) == (a.APIKeys == nil) {
			errf("auth."+name, "auth.%s: set exactly one of jwt and api_keys", name)
		}
	}
	if len(c.Routes) == 0 {
		errf("", "routes: at least one is needed")
	}
	for i := range c.Routes {
		checkRoute(c, i, errf)
	}
}

// checkRoute checks the i-th route's parts that are the gateway's, and
// what they refer to.
func checkRoute(c *Config, i int, errf func(path, format string, args ...any)) {
	r := &c.Routes[i]
	at, where := fmt.Sprintf("routes[%d]", i), routeName(i, r.Name)
	if (len(r.Upstreams) == 0) == (r.GRPC == nil) {
		errf(at, "%s: set upstreams, or grpc to transcode to a gRPC upstream", where)
	}
	if r.MaxBodyBytes < 0 {
		errf(at, "%s.max_body_bytes: must not be negative", where)
	}
	if _, ok := c.Auth[r.Auth]; r.Auth != "" && !ok {
		errf(at, "%s.auth: no auth named %q (defined: %s)", where, r.Auth, strings.Join(slices.Sorted(maps.Keys(c.Auth)), ", "))
	}
	l := r.Limits
	if l == nil {
		return
	}
	at += ".limits"
	if l.Domain == "" {
		errf(at, "%s.limits.domain: required: the rules domain the descriptors are decided in", where)
	}
	if c.Rules == "" {
		errf(at, "%s.limits: the config has no rules file (rules: at the top level)", where)
	}
	if len(l.Descriptors) == 0 {
		errf(at, "%s.limits.descriptors: at least one is needed, such as [user_id]", where)
	}
	if l.Usage != nil {
		if _, err := l.Usage.parse(); err != nil {
			errf(at+".usage", "%s.limits.usage.%v", where, err)
		}
	}
	for j, d := range l.Descriptors {
		if len(d) == 0 {
			errf(at, "%s.limits.descriptors[%d]: empty", where, j)
		}
		for _, s := range d {
			e, err := parseEntry(s)
			switch {
			case err != nil:
				errf(at, "%s.limits.descriptors[%d]: %v", where, j, err)
			case (e.fact == "user_id" || e.fact == "plan" || e.fact == "api_key") && r.Auth == "":
				errf(at, "%s.limits.descriptors[%d]: %s needs the route to authenticate (auth:)", where, j, e.fact)
			}
		}
	}
}
