package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/bouncerhq/bouncer/admin"
	"github.com/bouncerhq/bouncer/rules"
)

// The endpoints envoyproxy/ratelimit serves besides gRPC, answered as it
// answers them, so that its probes, scripts and clients keep working:
// GET /healthcheck and POST /json (rls.Server.JSON) on the HTTP
// listener, GET /rlconfig on the admin one (its debug port).

// healthcheck answers "OK" while the service serves, and 500 with an
// empty body once it drains.
func healthcheck(draining func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if draining() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "OK")
	})
}

// rlconfigEndpoint is GET /rlconfig on the admin listener.
func rlconfigEndpoint(e *rules.Engine) admin.Extra {
	return admin.Extra{
		Endpoint: admin.Endpoint{Method: "GET", Path: "/rlconfig", Description: "the config being served, one line per limit, as envoyproxy/ratelimit prints it"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, dumpConfig(e.Config()))
		}),
	}
}

// dumpConfig prints each rule of c with a limit on a line of its own, as
// envoyproxy/ratelimit prints its config:
//
//	<domain>.<key_value>...: unit=HOUR requests_per_unit=2, shadow_mode: false, quota_mode: false
//
// in domain and file order (that project's order is its maps'). A rule
// in Bouncer's format is named by its name.
func dumpConfig(c *rules.Config) string {
	var b strings.Builder
	for _, d := range c.Domains() {
		for _, r := range d.Rules {
			path := r.Path
			if path == "" {
				path = r.Name
			}
			fmt.Fprintf(&b, "%s.%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t\n",
				d.Name, path, strings.ToUpper(r.Unit.String()), r.RequestsPerUnit, r.Shadow, r.QuotaMode)
		}
	}
	return b.String()
}
