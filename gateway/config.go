package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// Config is a validated gateway config, immutable once loaded.
type Config struct {
	File string // the file it was read from

	// Rules is the rate-limit rules config (a file or directory, as
	// `bouncer serve --config` takes), resolved against the file's
	// directory; "" when no route is limited.
	Rules string

	Listeners      []Listener
	Admin          string // the admin listener's address; "" for none
	TrustedProxies []string
	ForwardedBy    string // "X-Forwarded-For" (default) or "Forwarded"
	MaxBodyBytes   int64
	Auth           map[string]Auth
	Routes         []Route
}

// Listener is an address the gateway serves, with TLS if TLS is set.
type Listener struct {
	Addr string
	TLS  *TLS
	Line int
}

// TLS is a listener's certificate and, optionally, the CA its clients'
// certificates must chain to.
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
	ClientAuth                      string // none, request, require
	MinVersion                      string
}

// Auth is one named way of authenticating callers: exactly one of JWT and
// APIKeys is set.
type Auth struct {
	JWT     *JWT
	APIKeys *APIKeys
	Line    int
}

// JWT is a JWT authenticator's settings.
type JWT struct {
	Keys          []JWTKey
	Issuer        string
	Audience      []string
	Skew          time.Duration
	SubjectClaim  string
	PlanClaim     string
	MaxTokenBytes int
	Header        string
}

// JWTKey is where verification keys come from, and the algorithms they
// may verify.
type JWTKey struct {
	File, JWKSFile, JWKSURL, KeyID string
	Algorithms                     []string
}

// APIKeys is an API-key authenticator's settings: the keys, hashed.
type APIKeys struct {
	Header, Query string
	Keys          []APIKey
}

// APIKey is one key: its ID (the caller it identifies), the SHA-256 of
// the key ("sha256:<hex>"), and its plan.
type APIKey struct{ ID, Hash, Plan string }

// Route is one route of the config.
type Route struct {
	Name         string
	Host         string
	PathPrefix   string
	StripPrefix  bool
	Upstreams    []string
	Timeout      time.Duration
	Retries      int
	Health       *HealthCheck
	Auth         string // the name of an Auth; "" for none
	Limits       *Limits
	GRPC         *GRPC
	MaxBodyBytes int64
	Line         int
}

// HealthCheck is a route's active health check.
type HealthCheck struct {
	Path               string
	Interval, Timeout  time.Duration
	Healthy, Unhealthy int
}

// Limits say which descriptors a route's requests are decided with, in
// which domain of the rules.
type Limits struct {
	Domain      string
	Descriptors [][]Entry
}

// Entry is one entry of a descriptor: Fact names what of the request its
// value is (see Facts), or Value is a literal.
type Entry struct {
	Key   string
	Fact  string // "" for a literal
	Value string
}

// GRPC makes a route transcode JSON/HTTP to a gRPC upstream.
type GRPC struct {
	DescriptorSet string
	Upstream      string // h2c://host:port or https://host:port
	Services      []string
}

// Facts are what a descriptor entry may take from a request:
//
//   - user_id: the verified caller (the JWT's subject, the API key's ID);
//   - plan: the caller's plan (a claim, the key table);
//   - api_key: the ID of the API key that authenticated the request;
//   - client_ip: the client's address, behind trusted proxies only;
//   - route: the route's name;
//   - method: the HTTP method;
//   - path: the URL path;
//   - header:<Name>: a request header's value.
//
// A descriptor that a request has no value for (no user on a route
// without authentication, a missing header) is not sent.
var Facts = []string{"user_id", "plan", "api_key", "client_ip", "route", "method", "path"}

// MaxFileSize bounds a gateway config file.
const MaxFileSize = 4 << 20

// DefaultMaxBodyBytes bounds a request's body when the config sets none.
const DefaultMaxBodyBytes = 10 << 20

// Load reads and validates the gateway config in file. The error lists
// every problem with file, line and reason (*ConfigError).
func Load(file string) (*Config, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("gateway: %s: %d bytes, at most %d", file, fi.Size(), MaxFileSize)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return Parse(file, data)
}

// Problem is one thing wrong with a config.
type Problem = yamlconf.Problem

// ConfigError lists every problem of a config, in line order.
type ConfigError struct{ Problems []Problem }

func (e *ConfigError) Error() string { return yamlconf.Lines("gateway: invalid config:", e.Problems) }

type problems struct{ yamlconf.Problems }

func (p *problems) add(file string, line int, reason string) { p.Add(file, line, reason) }

func (p *problems) err() error {
	if ps := p.Sorted(); ps != nil {
		return &ConfigError{ps}
	}
	return nil
}

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
	HealthCheck  *rawHealth    `yaml:"health_check"`
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

// Parse validates data, the contents of file.
func Parse(file string, data []byte) (*Config, error) {
	var ps problems
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.add(file, 0, fmt.Sprintf("not valid YAML: %v", err))
		return nil, ps.err()
	}
	if len(doc.Content) == 0 {
		ps.add(file, 0, "empty file")
		return nil, ps.err()
	}
	var f rawFile
	dec := yamlconf.Decoder{File: file, Report: ps.add}
	dec.Decode(doc.Content[0], &f)
	if err := ps.err(); err != nil {
		return nil, err
	}
	c := compile(file, &f, &ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

func compile(file string, f *rawFile, ps *problems) *Config {
	errf := func(line int, format string, args ...any) { ps.add(file, line, fmt.Sprintf(format, args...)) }
	dir := filepath.Dir(file)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c := &Config{File: file, Rules: rel(f.Rules), Admin: f.Admin, TrustedProxies: f.TrustedProxies,
		ForwardedBy: f.ForwardedBy, MaxBodyBytes: f.MaxBodyBytes, Auth: map[string]Auth{}}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
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
		out := Listener{Addr: l.Addr, Line: l.At.Line}
		if t := l.TLS; t != nil {
			if t.CertFile == "" || t.KeyFile == "" {
				errf(t.At.Line, "listeners[%d].tls: cert_file and key_file are required", i)
			}
			if t.ClientCAFile != "" && t.ClientAuth == "" {
				t.ClientAuth = "require" // a CA to check clients against means client certificates
			}
			switch t.ClientAuth {
			case "", "none":
			case "request", "require":
				if t.ClientCAFile == "" {
					errf(t.At.Line, "listeners[%d].tls.client_auth %q needs client_ca_file", i, t.ClientAuth)
				}
			default:
				errf(t.At.Line, "listeners[%d].tls.client_auth: %q is not none, request or require", i, t.ClientAuth)
			}
			out.TLS = &TLS{CertFile: rel(t.CertFile), KeyFile: rel(t.KeyFile), ClientCAFile: rel(t.ClientCAFile), ClientAuth: t.ClientAuth, MinVersion: t.MinVersion}
		}
		c.Listeners = append(c.Listeners, out)
	}
	switch f.ForwardedBy {
	case "", "X-Forwarded-For", "Forwarded":
	default:
		errf(f.At.Line, "forwarded_header: %q is not X-Forwarded-For or Forwarded", f.ForwardedBy)
	}
	for name, a := range f.Auth {
		out := Auth{Line: a.At.Line}
		switch {
		case (a.JWT == nil) == (a.APIKeys == nil):
			errf(a.At.Line, "auth.%s: set exactly one of jwt and api_keys", name)
		case a.JWT != nil:
			j := a.JWT
			if len(j.Keys) == 0 {
				errf(j.At.Line, "auth.%s.jwt.keys: at least one key source is needed", name)
			}
			out.JWT = &JWT{Issuer: j.Issuer, Audience: j.Audience, Skew: j.Skew, SubjectClaim: j.SubjectClaim,
				PlanClaim: j.PlanClaim, MaxTokenBytes: j.MaxTokenBytes, Header: j.Header}
			for k, key := range j.Keys {
				n := 0
				for _, s := range []string{key.File, key.JWKSFile, key.JWKSURL} {
					if s != "" {
						n++
					}
				}
				if n != 1 {
					errf(key.At.Line, "auth.%s.jwt.keys[%d]: set exactly one of file, jwks_file and jwks_url", name, k)
				}
				if key.File != "" && len(key.Algorithms) == 0 {
					errf(key.At.Line, "auth.%s.jwt.keys[%d]: a key file needs algorithms (HS256, RS256, ES256 or EdDSA)", name, k)
				}
				for _, alg := range key.Algorithms {
					if !slices.Contains([]string{"HS256", "RS256", "ES256", "EdDSA"}, alg) {
						errf(key.At.Line, "auth.%s.jwt.keys[%d].algorithms: %q is not HS256, RS256, ES256 or EdDSA", name, k, alg)
					}
				}
				out.JWT.Keys = append(out.JWT.Keys, JWTKey{File: rel(key.File), JWKSFile: rel(key.JWKSFile), JWKSURL: key.JWKSURL, KeyID: key.KeyID, Algorithms: key.Algorithms})
			}
		default:
			k := a.APIKeys
			if len(k.Keys) == 0 {
				errf(k.At.Line, "auth.%s.api_keys.keys: at least one key is needed", name)
			}
			out.APIKeys = &APIKeys{Header: k.Header, Query: k.Query}
			ids := map[string]bool{}
			for i, key := range k.Keys {
				switch {
				case key.ID == "":
					errf(key.At.Line, "auth.%s.api_keys.keys[%d].id: required", name, i)
				case ids[key.ID]:
					errf(key.At.Line, "auth.%s.api_keys.keys[%d].id: %q given twice", name, i, key.ID)
				}
				ids[key.ID] = true
				if !validHash(key.Hash) {
					errf(key.At.Line, "auth.%s.api_keys.keys[%d].hash: want sha256: and 64 hex digits (bouncer gateway hash-key prints it), never the key itself", name, i)
				}
				out.APIKeys.Keys = append(out.APIKeys.Keys, APIKey{ID: key.ID, Hash: key.Hash, Plan: key.Plan})
			}
		}
		c.Auth[name] = out
	}
	names := map[string]bool{}
	for i, r := range f.Routes {
		at := r.At.Line
		where := fmt.Sprintf("routes[%d]", i)
		if r.Name != "" {
			where = fmt.Sprintf("routes[%d] (%s)", i, r.Name)
		}
		switch {
		case r.Name == "":
			errf(at, "%s.name: required", where)
		case names[r.Name]:
			errf(at, "%s.name: a second route named %q", where, r.Name)
		}
		names[r.Name] = true
		if !strings.HasPrefix(r.PathPrefix, "/") {
			errf(at, "%s.path_prefix: %q must start with /", where, r.PathPrefix)
		}
		out := Route{Name: r.Name, Host: r.Host, PathPrefix: r.PathPrefix, StripPrefix: r.StripPrefix, Upstreams: r.Upstreams,
			Timeout: r.Timeout, Retries: r.Retries, Auth: r.Auth, MaxBodyBytes: r.MaxBodyBytes, Line: at}
		if out.MaxBodyBytes == 0 {
			out.MaxBodyBytes = c.MaxBodyBytes
		}
		if (len(r.Upstreams) == 0) == (r.GRPC == nil) {
			errf(at, "%s: set upstreams, or grpc to transcode to a gRPC upstream", where)
		}
		for _, u := range r.Upstreams {
			if err := checkUpstream(u); err != nil {
				errf(at, "%s.upstreams: %v", where, err)
			}
		}
		if r.Timeout < 0 || r.Retries < 0 {
			errf(at, "%s: timeout and retries must not be negative", where)
		}
		if h := r.HealthCheck; h != nil {
			if !strings.HasPrefix(h.Path, "/") {
				errf(h.At.Line, "%s.health_check.path: %q must start with /", where, h.Path)
			}
			out.Health = &HealthCheck{Path: h.Path, Interval: h.Interval, Timeout: h.Timeout, Healthy: h.Healthy, Unhealthy: h.Unhealthy}
		}
		if r.Auth != "" {
			if _, ok := f.Auth[r.Auth]; !ok {
				errf(at, "%s.auth: no auth named %q (defined: %s)", where, r.Auth, strings.Join(mapKeys(f.Auth), ", "))
			}
		}
		if g := r.GRPC; g != nil {
			if g.DescriptorSet == "" {
				errf(g.At.Line, "%s.grpc.descriptor_set: required (protoc --include_imports --descriptor_set_out)", where)
			}
			if err := checkUpstream(g.Upstream); err != nil {
				errf(g.At.Line, "%s.grpc.upstream: %v", where, err)
			}
			out.GRPC = &GRPC{DescriptorSet: rel(g.DescriptorSet), Upstream: g.Upstream, Services: g.Services}
		}
		if l := r.Limits; l != nil {
			if l.Domain == "" {
				errf(l.At.Line, "%s.limits.domain: required: the rules domain the descriptors are decided in", where)
			}
			if f.Rules == "" {
				errf(l.At.Line, "%s.limits: the config has no rules file (rules: at the top level)", where)
			}
			if len(l.Descriptors) == 0 {
				errf(l.At.Line, "%s.limits.descriptors: at least one is needed, such as [user_id]", where)
			}
			out.Limits = &Limits{Domain: l.Domain}
			for j, d := range l.Descriptors {
				if len(d) == 0 {
					errf(l.At.Line, "%s.limits.descriptors[%d]: empty", where, j)
				}
				var ds []Entry
				for _, e := range d {
					entry, err := parseEntry(e)
					if err != nil {
						errf(l.At.Line, "%s.limits.descriptors[%d]: %v", where, j, err)
					}
					if entry.Fact == "user_id" || entry.Fact == "plan" || entry.Fact == "api_key" {
						if r.Auth == "" {
							errf(l.At.Line, "%s.limits.descriptors[%d]: %s needs the route to authenticate (auth:)", where, j, entry.Fact)
						}
					}
					ds = append(ds, entry)
				}
				out.Limits.Descriptors = append(out.Limits.Descriptors, ds)
			}
		}
		c.Routes = append(c.Routes, out)
	}
	if len(f.Routes) == 0 {
		errf(f.At.Line, "routes: at least one is needed")
	}
	return c
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

func checkUpstream(u string) error {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return fmt.Errorf("%q is not a URL such as http://127.0.0.1:9000", u)
	}
	switch p.Scheme {
	case "http", "https", "h2c":
		return nil
	}
	return fmt.Errorf("%q: the scheme must be http, https or h2c", u)
}

func validHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
