package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/gateway/tlsreload"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// The file's YAML: its fields under their YAML names, with the line of
// each mapping (At), made into a Config once (rawFile.config). They
// check nothing but the YAML; their Go names are those of the packages'
// types, so that a package's error about a field (a Go selector, such
// as Keys[1].Algorithms) is pointed at its YAML path and line (locate).

type rawFile struct {
	At             yamlconf.Pos
	Rules          string             `yaml:"rules"`
	Listeners      []rawListener      `yaml:"listeners"`
	Admin          string             `yaml:"admin"`
	TrustedProxies []string           `yaml:"trusted_proxies"`
	ForwardedBy    string             `yaml:"forwarded_header"`
	MaxBodyBytes   int64              `yaml:"max_body_bytes"`
	Auth           map[string]rawAuth `yaml:"auth"`
	Routes         []rawRoute         `yaml:"routes"`
}

type rawListener struct {
	At   yamlconf.Pos
	Addr string  `yaml:"addr"`
	TLS  *rawTLS `yaml:"tls"`
}

type rawTLS struct {
	At           yamlconf.Pos
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	ClientAuth   string `yaml:"client_auth"`
	MinVersion   string `yaml:"min_version"`
}

type rawAuth struct {
	At      yamlconf.Pos
	JWT     *rawJWT     `yaml:"jwt"`
	APIKeys *rawAPIKeys `yaml:"api_keys"`
}

type rawJWT struct {
	At            yamlconf.Pos
	Keys          []rawJWTKey   `yaml:"keys"`
	Issuer        string        `yaml:"issuer"`
	Audience      []string      `yaml:"audience"`
	Skew          time.Duration `yaml:"skew"`
	SubjectClaim  string        `yaml:"subject_claim"`
	PlanClaim     string        `yaml:"plan_claim"`
	MaxTokenBytes int           `yaml:"max_token_bytes"`
	Header        string        `yaml:"header"`
}

type rawJWTKey struct {
	At         yamlconf.Pos
	File       string   `yaml:"file"`
	JWKSFile   string   `yaml:"jwks_file"`
	JWKSURL    string   `yaml:"jwks_url"`
	KeyID      string   `yaml:"kid"`
	Algorithms []string `yaml:"algorithms"`
}

type rawAPIKeys struct {
	At     yamlconf.Pos
	Header string      `yaml:"header"`
	Query  string      `yaml:"query"`
	Keys   []rawAPIKey `yaml:"keys"`
}

type rawAPIKey struct {
	At   yamlconf.Pos
	ID   string `yaml:"id"`
	Hash string `yaml:"hash"`
	Plan string `yaml:"plan"`
}

type rawRoute struct {
	At           yamlconf.Pos
	Name         string        `yaml:"name"`
	Host         string        `yaml:"host"`
	PathPrefix   string        `yaml:"path_prefix"`
	StripPrefix  bool          `yaml:"strip_prefix"`
	Upstreams    []string      `yaml:"upstreams"`
	Timeout      time.Duration `yaml:"timeout"`
	Retries      int           `yaml:"retries"`
	Health       *rawHealth    `yaml:"health_check"`
	Auth         string        `yaml:"auth"`
	Limits       *rawLimits    `yaml:"limits"`
	GRPC         *rawGRPC      `yaml:"grpc"`
	MaxBodyBytes int64         `yaml:"max_body_bytes"`
}

type rawHealth struct {
	At        yamlconf.Pos
	Path      string        `yaml:"path"`
	Interval  time.Duration `yaml:"interval"`
	Timeout   time.Duration `yaml:"timeout"`
	Healthy   int           `yaml:"healthy"`
	Unhealthy int           `yaml:"unhealthy"`
}

type rawLimits struct {
	At          yamlconf.Pos
	Domain      string     `yaml:"domain"`
	Descriptors [][]string `yaml:"descriptors"`
}

type rawGRPC struct {
	At            yamlconf.Pos
	DescriptorSet string   `yaml:"descriptor_set"`
	Upstream      string   `yaml:"upstream"`
	Services      []string `yaml:"services"`
}

// config is the Config f says, its paths resolved against file's
// directory and its defaults set. A descriptor entry that is not one is
// reported to ps.
func (f *rawFile) config(file string, ps *problems) *Config {
	rel := relativeTo(filepath.Dir(file))
	c := &Config{File: file, Rules: rel(f.Rules), Admin: f.Admin, TrustedProxies: f.TrustedProxies,
		ForwardedBy: f.ForwardedBy, MaxBodyBytes: cmp.Or(f.MaxBodyBytes, DefaultMaxBodyBytes), Auth: map[string]Auth{}, src: f}
	for _, l := range f.Listeners {
		c.Listeners = append(c.Listeners, Listener{Addr: l.Addr, TLS: l.TLS.config(rel), Line: l.At.Line})
	}
	for name, a := range f.Auth {
		c.Auth[name] = Auth{JWT: a.JWT.config(name, rel), APIKeys: a.APIKeys.config(name)}
	}
	for i := range f.Routes {
		r := &f.Routes[i]
		out := Route{Route: r.route(), Auth: r.Auth, MaxBodyBytes: cmp.Or(r.MaxBodyBytes, c.MaxBodyBytes)}
		if g := r.GRPC; g != nil {
			out.GRPC = &GRPC{DescriptorSet: rel(g.DescriptorSet), Upstream: g.Upstream, Services: g.Services}
			out.Upstreams = []string{g.Upstream}
		}
		if r.Limits != nil {
			out.Limits = r.Limits.limits(func(j int, err error) {
				ps.add(file, r.Limits.At.Line, fmt.Sprintf("%s.limits.descriptors[%d]: %v", routeName(i, r.Name), j, err))
			})
		}
		c.Routes = append(c.Routes, out)
	}
	return c
}

// relativeTo resolves a relative path against dir.
func relativeTo(dir string) func(string) string {
	return func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
}

func (t *rawTLS) config(rel func(string) string) *tlsreload.Config {
	if t == nil {
		return nil
	}
	c := &tlsreload.Config{CertFile: rel(t.CertFile), KeyFile: rel(t.KeyFile), ClientCAFile: rel(t.ClientCAFile), ClientAuth: t.ClientAuth, MinVersion: t.MinVersion}
	if c.ClientCAFile != "" && c.ClientAuth == "" {
		c.ClientAuth = "require" // a CA to check clients against means client certificates
	}
	return c
}

func (j *rawJWT) config(name string, rel func(string) string) *auth.JWTConfig {
	if j == nil {
		return nil
	}
	c := &auth.JWTConfig{Name: name, Issuer: j.Issuer, Audience: j.Audience, Skew: j.Skew, SubjectClaim: j.SubjectClaim,
		PlanClaim: j.PlanClaim, MaxTokenBytes: j.MaxTokenBytes, Header: j.Header}
	for _, k := range j.Keys {
		c.Keys = append(c.Keys, auth.KeySource{File: rel(k.File), JWKSFile: rel(k.JWKSFile), JWKSURL: k.JWKSURL, KeyID: k.KeyID, Algorithms: k.Algorithms})
	}
	return c
}

func (k *rawAPIKeys) config(name string) *auth.APIKeyConfig {
	if k == nil {
		return nil
	}
	c := &auth.APIKeyConfig{Name: name, Header: k.Header, Query: k.Query}
	for _, key := range k.Keys {
		c.Keys = append(c.Keys, auth.APIKey{ID: key.ID, Hash: key.Hash, Plan: key.Plan})
	}
	return c
}

func (r *rawRoute) route() route.Route {
	out := route.Route{Name: r.Name, Host: r.Host, PathPrefix: r.PathPrefix, StripPrefix: r.StripPrefix,
		Upstreams: r.Upstreams, Timeout: r.Timeout, Retries: r.Retries}
	if h := r.Health; h != nil {
		out.Health = &route.HealthCheck{Path: h.Path, Interval: h.Interval, Timeout: h.Timeout, Healthy: h.Healthy, Unhealthy: h.Unhealthy}
	}
	return out
}

// limits reads l's descriptors, reporting each entry that is not one.
func (l *rawLimits) limits(report func(descriptor int, err error)) *Limits {
	out := &Limits{Domain: l.Domain}
	for j, d := range l.Descriptors {
		var ds []Entry
		for _, e := range d {
			entry, err := parseEntry(e)
			if err != nil {
				report(j, err)
			}
			ds = append(ds, entry)
		}
		out.Descriptors = append(out.Descriptors, ds)
	}
	return out
}

// parseEntry reads a descriptor entry: a fact ("user_id", "header:X-Tenant")
// or a literal ("generic_key=global").
func parseEntry(s string) (Entry, error) {
	if k, v, ok := strings.Cut(s, "="); ok {
		if k == "" || v == "" {
			return Entry{}, fmt.Errorf("%q: a literal entry is key=value", s)
		}
		return Entry{Key: k, Value: v}, nil
	}
	if name, ok := strings.CutPrefix(s, "header:"); ok {
		if name == "" {
			return Entry{}, errors.New("header: needs a header name, as header:X-Tenant")
		}
		return Entry{Key: strings.ToLower(name), Fact: s}, nil
	}
	if !slices.Contains(Facts, s) {
		return Entry{}, fmt.Errorf("%q is not a fact (%s, header:<Name>) nor a key=value literal", s, strings.Join(Facts, ", "))
	}
	return Entry{Key: s, Fact: s}, nil
}

// routeName is how problems name the i-th route.
func routeName(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("routes[%d]", i)
	}
	return fmt.Sprintf("routes[%d] (%s)", i, name)
}

// locate follows sel, a Go selector ("Keys[1].Algorithms",
// "Health.Path"), from v, one of the YAML shapes above, and returns its
// YAML path ("keys[1].algorithms") and the line of the innermost mapping
// it reaches; 0 when v is nil. The walk ends at a field the YAML does not
// have (a package's own).
func locate(v any, sel string) (path string, line int) {
	rv := reflect.ValueOf(v)
	for {
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		if rv.Kind() == reflect.Struct {
			if at, ok := rv.FieldByName("At").Interface().(yamlconf.Pos); ok {
				line = at.Line
			}
		}
		var part string
		if part, sel = nextPart(sel); part == "" {
			return path, line
		}
		switch {
		case part[0] == '[' && rv.Kind() == reflect.Slice:
			i, err := strconv.Atoi(part[1 : len(part)-1])
			if err != nil || i >= rv.Len() {
				return path, line
			}
			path, rv = path+part, rv.Index(i)
		case part[0] != '[' && rv.Kind() == reflect.Struct:
			f, ok := rv.Type().FieldByName(part)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !ok || name == "" {
				return path, line
			}
			path, rv = joinPath(path, name), rv.FieldByIndex(f.Index)
		default:
			return path, line
		}
	}
}

// nextPart splits sel's first part off: a field name or an index "[1]".
func nextPart(sel string) (part, rest string) {
	sel = strings.TrimPrefix(sel, ".")
	if strings.HasPrefix(sel, "[") {
		if i := strings.IndexByte(sel, ']'); i > 0 {
			return sel[:i+1], sel[i+1:]
		}
		return "", ""
	}
	if i := strings.IndexAny(sel, ".["); i >= 0 {
		return sel[:i], sel[i:]
	}
	return sel, ""
}

func joinPath(path, field string) string {
	if path == "" || field == "" {
		return path + field
	}
	return path + "." + field
}
