package gateway

import (
	"fmt"
	"net/http"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/bouncerhq/bouncer/gateway/route"
	"github.com/bouncerhq/bouncer/gateway/tlsreload"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// Config is a gateway config, immutable once loaded. It is the file's
// YAML as is: its parts are the types of the packages that serve them
// (route.Route, auth.JWTConfig, auth.APIKeyConfig, tlsreload.Config),
// whose yaml tags name their fields, and each package checks its own
// part when the gateway is built (New). Parse checks what is the
// gateway's own: its settings and limits, and what refers to what.
type Config struct {
	File string `yaml:"-"` // the file it was read from

	// Rules is the rate-limit rules config (a file or directory, as
	// `bouncer serve --config` takes), resolved against the file's
	// directory; "" when no route is limited.
	Rules string `yaml:"rules"`

	Listeners      []Listener      `yaml:"listeners"`
	Admin          string          `yaml:"admin"` // the admin listener's address; "" for none
	TrustedProxies []string        `yaml:"trusted_proxies"`
	ForwardedBy    string          `yaml:"forwarded_header"` // "X-Forwarded-For" (default) or "Forwarded"
	MaxBodyBytes   int64           `yaml:"max_body_bytes"`
	Auth           map[string]Auth `yaml:"auth"`
	Routes         []Route         `yaml:"routes"`

	// lines are the lines of the file's mappings, by YAML path
	// ("routes[1].health_check"), which point a problem at its line; nil
	// for a Config made in Go.
	lines map[string]int
}

// Listener is an address the gateway serves, with TLS if TLS is set.
type Listener struct {
	Addr string            `yaml:"addr"`
	TLS  *tlsreload.Config `yaml:"tls"`
	Line int               `yaml:"-"` // its line in the file; 0 for a Config made in Go
}

// Auth is one named way of authenticating callers: exactly one of JWT and
// APIKeys is set. Their Name is the Auth's.
type Auth struct {
	JWT     *auth.JWTConfig    `yaml:"jwt"`
	APIKeys *auth.APIKeyConfig `yaml:"api_keys"`
}

// Route is one route of the config: where its requests go (route.Route;
// for a gRPC route, Upstreams is GRPC.Upstream), and what the gateway
// does to them on the way.
type Route struct {
	route.Route  `yaml:",inline"`
	Auth         string  `yaml:"auth"` // the name of an Auth; "" for none
	Limits       *Limits `yaml:"limits"`
	GRPC         *GRPC   `yaml:"grpc"`
	MaxBodyBytes int64   `yaml:"max_body_bytes"`

	// What New makes of the route, in its Gateway's copy of the config's:
	// the authenticator, where an API key may come (both are taken out
	// before proxying), the headers the gateway reads a value of (each
	// must come once, in one spelling: see oneSpelling), the limits'
	// descriptors and usage, and a transcoding route's handler.
	auth                auth.Authenticator
	keyHeader, keyQuery string
	read                []string
	descriptors         [][]entry
	meter               *meter
	grpc                http.Handler
}

// Limits say which descriptors a route's requests are decided with, in
// which domain of the rules. Each entry of a descriptor is a fact (see
// Facts), or a literal "key=value".
type Limits struct {
	Domain      string     `yaml:"domain"`
	Descriptors [][]string `yaml:"descriptors"`

	// Usage, if set, meters the route's descriptors in a cost known only
	// once the upstream has answered (Usage); without it a request costs
	// 1.
	Usage *Usage `yaml:"usage"`
}

// entry is one entry of a descriptor: fact names what of the request its
// value is, or value is a literal.
type entry struct {
	key   string
	fact  string // "" for a literal
	value string
}

// GRPC makes a route transcode JSON/HTTP to a gRPC upstream.
type GRPC struct {
	DescriptorSet string   `yaml:"descriptor_set"`
	Upstream      string   `yaml:"upstream"` // h2c://host:port or https://host:port
	Services      []string `yaml:"services"`
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
//   - header:<Name>: a request header's value;
//   - attribute:<name>: the caller's attribute: its API key's
//     (auth.APIKey.Attributes), or its JWT's claim of that name.
//
// A descriptor that a request has no value for (no user on a route
// without authentication, a missing header) is not sent.
var Facts = []string{"user_id", "plan", "api_key", "client_ip", "route", "method", "path"}

// MaxFileSize bounds a gateway config file.
const MaxFileSize = 4 << 20

// DefaultMaxBodyBytes bounds a request's body when the config sets none.
const DefaultMaxBodyBytes = 10 << 20

// Load reads the gateway config in file and checks it. The error lists
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

// Parse reads data, the contents of file, and checks what is the
// gateway's own (see Config).
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
	c := &Config{File: file}
	dec := yamlconf.Decoder{File: file, Report: ps.add}
	dec.Decode(doc.Content[0], c)
	if err := ps.err(); err != nil {
		return nil, err
	}
	c.lines = map[string]int{}
	mappingLines(doc.Content[0], "", c.lines)
	check(c, &ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	c.complete()
	return c, nil
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
