package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// check reports to ps what is wrong with c, read from f, that is the
// gateway's own to check: its settings, its limits, and the references
// between its parts. Each package checks its own fields when New builds
// the gateway from c.
func check(c *Config, f *rawFile, ps *problems) {
	errf := func(line int, format string, args ...any) { ps.add(c.File, line, fmt.Sprintf(format, args...)) }
	if c.MaxBodyBytes < 0 {
		errf(f.At.Line, "max_body_bytes: must not be negative")
	}
	if len(f.Listeners) == 0 {
		errf(f.At.Line, "listeners: at least one is needed (listeners: [{addr: 127.0.0.1:8080}])")
	}
	for i, l := range f.Listeners {
		if l.Addr == "" {
			errf(l.At.Line, "listeners[%d].addr: required", i)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Auth)) {
		if a := f.Auth[name]; (a.JWT == nil) == (a.APIKeys == nil) {
			errf(a.At.Line, "auth.%s: set exactly one of jwt and api_keys", name)
		}
	}
	if len(f.Routes) == 0 {
		errf(f.At.Line, "routes: at least one is needed")
	}
	for i := range f.Routes {
		checkRoute(c, &f.Routes[i], routeName(i, f.Routes[i].Name), errf)
	}
}

// checkRoute checks r's parts that are the gateway's, and what they
// refer to.
func checkRoute(c *Config, r *rawRoute, where string, errf func(int, string, ...any)) {
	if (len(r.Upstreams) == 0) == (r.GRPC == nil) {
		errf(r.At.Line, "%s: set upstreams, or grpc to transcode to a gRPC upstream", where)
	}
	if r.MaxBodyBytes < 0 {
		errf(r.At.Line, "%s.max_body_bytes: must not be negative", where)
	}
	if _, ok := c.Auth[r.Auth]; r.Auth != "" && !ok {
		errf(r.At.Line, "%s.auth: no auth named %q (defined: %s)", where, r.Auth, strings.Join(slices.Sorted(maps.Keys(c.Auth)), ", "))
	}
	l := r.Limits
	if l == nil {
		return
	}
	if l.Domain == "" {
		errf(l.At.Line, "%s.limits.domain: required: the rules domain the descriptors are decided in", where)
	}
	if c.Rules == "" {
		errf(l.At.Line, "%s.limits: the config has no rules file (rules: at the top level)", where)
	}
	if len(l.Descriptors) == 0 {
		errf(l.At.Line, "%s.limits.descriptors: at least one is needed, such as [user_id]", where)
	}
	for j, d := range l.Descriptors {
		if len(d) == 0 {
			errf(l.At.Line, "%s.limits.descriptors[%d]: empty", where, j)
		}
		for _, e := range d {
			if (e == "user_id" || e == "plan" || e == "api_key") && r.Auth == "" {
				errf(l.At.Line, "%s.limits.descriptors[%d]: %s needs the route to authenticate (auth:)", where, j, e)
			}
		}
	}
}
