package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/gateway/tlsreload"
	"github.com/bouncerhq/bouncer/gateway/transcode"
)

// What New makes of a Config. Each package checks its own part; what it
// finds is reported to a problems with the file and line of the part
// (report).

// resolveClients makes the resolver of the clients' addresses.
func (g *Gateway) resolveClients(ps *problems) {
	c := g.cfg
	prefixes, err := clientip.ParsePrefixes(c.TrustedProxies)
	if err != nil {
		c.report(ps, "trusted_proxies", "", nil, "", err)
		return
	}
	g.clients = &clientip.Resolver{TrustedProxies: prefixes, Header: c.ForwardedBy}
	if err := g.clients.Validate(); err != nil {
		c.report(ps, "forwarded_header", "", nil, "", err)
	}
}

// checkListeners checks the listeners' TLS settings, which the caller
// that listens builds its tlsreload.Reloaders from.
func checkListeners(c *Config, ps *problems) {
	for i, l := range c.Listeners {
		if l.TLS == nil {
			continue
		}
		if err := l.TLS.Validate(); err != nil {
			at := fmt.Sprintf("listeners[%d].tls", i)
			c.report(ps, at, at, reflect.TypeFor[tlsreload.Config](), fieldOf(err), err)
		}
	}
}

// authenticators makes the config's authenticators, by name.
func (g *Gateway) authenticators(o Options, ps *problems) map[string]auth.Authenticator {
	c := g.cfg
	auths := map[string]auth.Authenticator{}
	for name, a := range c.Auth {
		switch {
		case a.JWT != nil:
			j, err := auth.NewJWT(*a.JWT, auth.Options{HTTPClient: o.JWKSClient, Logger: g.log})
			if err != nil {
				at := "auth." + name + ".jwt"
				c.report(ps, at, at, reflect.TypeFor[auth.JWTConfig](), fieldOf(err), err)
				continue
			}
			g.closers = append(g.closers, j.Close)
			auths[name] = j
		case a.APIKeys != nil:
			k, err := auth.NewAPIKeys(*a.APIKeys)
			if err != nil {
				at := "auth." + name + ".api_keys"
				c.report(ps, at, at, reflect.TypeFor[auth.APIKeyConfig](), fieldOf(err), err)
				continue
			}
			auths[name] = k
		}
	}
	return auths
}

// provision makes what the i-th route needs besides its table entry (see
// Route): its authenticator, the headers it reads, the check that its
// limits' domain exists, and a gRPC route's transcoder.
func (g *Gateway) provision(i int, auths map[string]auth.Authenticator, ps *problems) {
	c, r := g.cfg, &g.routes[i]
	report := func(field string, err error) {
		c.report(ps, routeName(i, r.Name), fmt.Sprintf("routes[%d]", i), reflect.TypeFor[Route](), field, err)
	}
	r.auth = auths[r.Auth]
	if a := c.Auth[r.Auth]; a.APIKeys != nil {
		r.keyHeader, r.keyQuery = cmp.Or(a.APIKeys.Header, auth.DefaultAPIKeyHeader), a.APIKeys.Query
	} else if a.JWT != nil {
		r.read = append(r.read, http.CanonicalHeaderKey(cmp.Or(a.JWT.Header, "Authorization")))
	}
	if l := r.Limits; l != nil {
		r.descriptors = make([][]entry, len(l.Descriptors))
		for j, d := range l.Descriptors {
			for _, s := range d {
				e, err := parseEntry(s) // checked by Parse, for a Config it read
				if err != nil {
					report(fmt.Sprintf("Limits.Descriptors[%d]", j), err)
				}
				if h, ok := strings.CutPrefix(e.fact, "header:"); ok {
					r.read = append(r.read, http.CanonicalHeaderKey(h))
				}
				r.descriptors[j] = append(r.descriptors[j], e)
			}
		}
		if l.Usage != nil {
			m, err := l.Usage.parse() // checked by Parse, for a Config it read
			if err != nil {
				report("Limits.Usage", err)
			}
			if m != nil && m.estHeader != "" {
				r.read = append(r.read, m.estHeader)
			}
			r.meter = m
		}
		switch {
		case g.engine == nil:
			report("Limits", errors.New("limits need a rules engine"))
		case g.engine.Config().Domain(l.Domain) == nil:
			report("Limits.Domain", fmt.Errorf("the rules define no domain %q", l.Domain))
		}
	}
	if r.GRPC != nil {
		h, closeConn, err := g.transcoder(r)
		if err != nil {
			report("GRPC", err)
			return
		}
		g.closers = append(g.closers, closeConn)
		r.grpc = h
	}
}

// transcoder connects to a gRPC route's upstream and returns its
// transcoding handler.
func (g *Gateway) transcoder(r *Route) (http.Handler, func(), error) {
	creds := insecure.NewCredentials()
	target := strings.TrimPrefix(r.GRPC.Upstream, "h2c://")
	if t, ok := strings.CutPrefix(r.GRPC.Upstream, "https://"); ok {
		creds, target = credentials.NewTLS(nil), t
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, err
	}
	h, err := transcode.New(transcode.Options{DescriptorSet: r.GRPC.DescriptorSet, Services: r.GRPC.Services, Conn: conn,
		Timeout: r.Timeout, MaxBodyBytes: r.MaxBodyBytes, Logger: g.log})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return h, func() { conn.Close() }, nil
}

// newTable makes the routes' table, which checks their route.Route.
func (g *Gateway) newTable(o Options, ps *problems) {
	routes := make([]route.Route, len(g.routes))
	for i := range g.routes {
		routes[i] = g.routes[i].Route
	}
	ro := route.Options{Logger: g.log, Transport: o.Transport}
	if g.metrics != nil {
		ro.OnUpstream = g.metrics.upstream
	}
	t, err := route.New(routes, ro)
	if err == nil {
		g.table = t
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var fe *route.FieldError
		if !errors.As(err, &fe) {
			g.cfg.report(ps, "routes", "", nil, "", err)
			continue
		}
		r, field := &g.routes[fe.Route], fe.Field
		if r.GRPC != nil && strings.HasPrefix(field, "Upstreams") {
			field = "GRPC.Upstream" // where a gRPC route's one upstream comes from
		}
		g.cfg.report(ps, routeName(fe.Route, r.Name), fmt.Sprintf("routes[%d]", fe.Route), reflect.TypeFor[Route](), field, err)
	}
}

// report reports err, which a package found in field (a Go selector
// from the part of c of type t at the YAML path at, which problems name
// where), with the file, the line and the YAML path of the field.
func (c *Config) report(ps *problems, where, at string, t reflect.Type, field string, err error) {
	path := ""
	if t != nil {
		path = yamlPath(t, field)
	}
	ps.add(c.File, c.line(joinPath(at, path)), fmt.Sprintf("%s: %v", joinPath(where, path), err))
}

// fieldOf is the field an auth or tlsreload error names, or "".
func fieldOf(err error) string {
	var a *auth.FieldError
	var t *tlsreload.FieldError
	switch {
	case errors.As(err, &a):
		return a.Field
	case errors.As(err, &t):
		return t.Field
	}
	return ""
}
