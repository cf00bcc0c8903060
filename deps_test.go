package bouncer_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// module is this module's import path.
const module = "github.com/bouncerhq/bouncer"

// allowedImports says which of the module's own packages, and which
// third-party modules, each package may import; the standard library is
// always allowed. Dependencies point toward the root: edges receive a
// bouncer.Limiter and never import a concrete store, and only cmd/ picks
// stores. A package missing from the table fails the test, so that a new
// package states its place.
var allowedImports = map[string][]string{
	"":                     {"calendar"},
	"store":                {""},
	"algo":                 {"", "calendar", "store"},
	"memstore":             {"", "algo", "calendar", "store"},
	"storetest":            {"", "calendar", "store", "pgregory.net/rapid"},
	"redisstore":           {"", "algo", "memstore", "store", "internal/pemfile", "github.com/redis/rueidis"},
	"hybrid":               {"", "calendar", "memstore", "store", "internal/fairshare"},
	"clientip":             {},
	"header":               {"", "store"},
	"internal/storekey":    {},
	"internal/fairshare":   {},
	"calendar":             {},
	"internal/yamlconf":    {"go.yaml.in/yaml/v3"},
	"internal/filewatch":   {"github.com/fsnotify/fsnotify"},
	"internal/pemfile":     {"internal/filewatch"},
	"internal/edgetest":    {"", "memstore", "store", "storetest"},
	"internal/replay":      {},
	"internal/urlpath":     {},
	"internal/simulate":    {"", "algo", "internal/yamlconf"},
	"internal/recorder":    {},
	"internal/browsertest": {},
	"internal/linkproxy":   {},
	"internal/edge":        {"", "header", "internal/storekey"},
	"httplimit":            {"", "header", "clientip", "internal/edge", "internal/recorder", "internal/storekey", "internal/urlpath"},
	"grpclimit":            {"", "header", "clientip", "internal/edge", "internal/storekey", "google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto/googleapis/rpc"},
	"httpretry":            {"header", "internal/replay"},
	"rules":                {"", "calendar", "store", "header", "internal/storekey", "internal/yamlconf", "internal/filewatch", "go.yaml.in/yaml/v3"},
	"rls":                  {"", "rules", "header", "github.com/envoyproxy/go-control-plane", "google.golang.org/grpc", "google.golang.org/protobuf", "go.opentelemetry.io/otel"},
	"rlqs":                 {"rules", "header", "internal/storekey", "internal/fairshare", "github.com/envoyproxy/go-control-plane", "google.golang.org/grpc", "google.golang.org/protobuf"},
	"jsonapi":              {"", "rules", "header", "go.opentelemetry.io/otel"},
	"tracing":              {"", "store", "go.opentelemetry.io/otel"},
	"admin":                {"", "rules", "github.com/prometheus/client_golang"},
	"metrics":              {"", "store", "rules", "github.com/prometheus/client_golang"},
	"gateway/auth":         {"github.com/golang-jwt/jwt/v5"},
	"gateway/tlsreload":    {"internal/pemfile"},
	"gateway/route":        {"clientip", "internal/replay", "internal/urlpath"},
	"gateway/transcode":    {"internal/urlpath", "google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto/googleapis/api", "google.golang.org/genproto/googleapis/rpc"},
	"cmd/bouncer": {"", "algo", "memstore", "redisstore", "hybrid", "rules", "rls", "rlqs", "jsonapi", "admin", "metrics", "tracing", "header", "go.opentelemetry.io/otel",
		"github.com/redis/rueidis", "github.com/prometheus/client_golang", "google.golang.org/grpc",
		"gateway", "gateway/auth", "gateway/route", "gateway/tlsreload", "internal/yamlconf", "internal/filewatch", "internal/bearer", "internal/simulate", "store"},
	"gateway": {"", "header", "clientip", "rules", "internal/edge", "internal/recorder", "internal/yamlconf", "gateway/auth", "gateway/route", "gateway/tlsreload", "gateway/transcode",
		"github.com/prometheus/client_golang", "google.golang.org/grpc", "go.yaml.in/yaml/v3", "go.opentelemetry.io/otel"},
	"internal/...": {""},
	"examples/...": {"", "memstore", "redisstore", "hybrid", "httplimit", "github.com/golang-jwt/jwt/v5"},
	// A gRPC service built from its descriptors, for the gateway to transcode.
	"examples/transcode": {"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto/googleapis/api", "google.golang.org/genproto/googleapis/rpc"},
	// An RLQS server and its clients in one process.
	"examples/rlqsfleet": {"memstore", "rules", "rlqs", "storetest", "google.golang.org/grpc"},
	// Three regions: hybrid.Options.Peers names the other regions' stores
	// as store.Sharer.
	"examples/regions": {"", "redisstore", "hybrid", "store"},
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ok := allowedFor(rel)
		if !ok {
			t.Errorf("package %q has no entry in allowedImports", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !isAllowed(imp, allowed) {
				t.Errorf("package %q imports %q; allowed: standard library and %q", p.ImportPath, imp, allowed)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("go list found %d packages, want the module's packages", seen)
	}
}

func allowedFor(rel string) ([]string, bool) {
	if a, ok := allowedImports[rel]; ok {
		return a, true
	}
	for pattern, a := range allowedImports {
		if prefix, ok := strings.CutSuffix(pattern, "/..."); ok && strings.HasPrefix(rel, prefix+"/") {
			return a, true
		}
	}
	return nil, false
}

func isAllowed(imp string, allowed []string) bool {
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return true // standard library
	}
	for _, a := range allowed {
		switch {
		case strings.Contains(a, "."): // a third-party module
			if imp == a || strings.HasPrefix(imp, a+"/") {
				return true
			}
		case a == "":
			if imp == module {
				return true
			}
		case imp == module+"/"+a:
			return true
		}
	}
	return false
}
