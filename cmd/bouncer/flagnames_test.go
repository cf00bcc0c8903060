package main

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/internal/simulate"
	"github.com/bouncerhq/bouncer/metrics"
)

// flagName matches a flag named in prose or a message: --name, not a
// dash inside a word or a third dash.
var flagName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])--([a-z][a-z0-9_-]*)`)

// notOurs are flags named in the repository that are other tools' or
// placeholders, each with why it is there.
var notOurs = map[string]string{
	"include_imports":    "protoc's, to make a gateway's descriptor set",
	"descriptor_set_out": "protoc's, to make a gateway's descriptor set",
	"name":               "docs/running.md's placeholder: flags are written --name value",
	"standalone":         "scripts/redis-up.sh's: one Redis, without the cluster",
	"tls":                "redis-cli's, which internal/redistest runs on the TLS servers it starts",
	"cacert":             "redis-cli's (internal/redistest)",
	"cert":               "redis-cli's (internal/redistest)",
	"key":                "redis-cli's (internal/redistest)",
	"cluster":            "redis-cli's (internal/redistest): --cluster create",
	"cluster-replicas":   "redis-cli's (internal/redistest)",
	"cluster-yes":        "redis-cli's (internal/redistest)",
	"user":               "redis-cli's (internal/redistest): a Sentinel set's ACL user",
	"pass":               "redis-cli's (internal/redistest)",
	"no-auth-warning":    "redis-cli's (internal/redistest)",
	"sentinel":           "redis-server's (internal/redistest): start as a sentinel",
	"port":               "redis-server's (internal/redistest.StartServer)",
	"bind":               "redis-server's (internal/redistest.StartServer)",
	"save":               "redis-server's (internal/redistest.StartServer)",
	"appendonly":         "redis-server's (internal/redistest.StartServer)",
	"dir":                "redis-server's (internal/redistest.StartServer)",
}

// commandFlags returns the flags each command takes, by command name;
// every command takes --help.
func commandFlags() map[string][]string {
	names := func(fs *flag.FlagSet) []string {
		var out []string
		fs.VisitAll(func(f *flag.Flag) { out = append(out, f.Name) })
		return out
	}
	var sc, gc serveConfig
	sim := simulate.FlagSet()
	out := map[string][]string{
		"serve":    names(serveFlags(&sc, io.Discard)),
		"gateway":  names(gatewayFlags(&gc, io.Discard)),
		"simulate": names(sim),
		"check":    {"mode", "on-store-error", "regions"},
		"version":  nil,
	}
	for name := range out {
		out[name] = append(out[name], "help", "h")
	}
	return out
}

// unknownFlags returns the flags text names that are not in known nor
// notOurs.
func unknownFlags(text string, known []string) []string {
	var out []string
	for _, m := range flagName.FindAllStringSubmatch(text, -1) {
		if f := m[1]; !slices.Contains(known, f) && notOurs[f] == "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// TestFlagsNamedExist checks that every flag a help text, a message or
// the docs name is one a command takes, so that no text sends an
// operator to a flag that does not exist.
func TestFlagsNamedExist(t *testing.T) {
	byCommand := commandFlags()
	if len(byCommand) != len(commands) {
		t.Fatalf("commandFlags has %d commands, the binary %d: add the new one", len(byCommand), len(commands))
	}
	var all []string
	for _, fs := range byCommand {
		all = append(all, fs...)
	}
	report := func(t *testing.T, where, text string, known []string) {
		t.Helper()
		for _, f := range unknownFlags(text, known) {
			t.Errorf("%s names --%s, which no command takes", where, f)
		}
	}

	t.Run("the check", func(t *testing.T) {
		got := unknownFlags("or rejected with --reject-unknown-domains; --unknown-domain error, a--b, ---x", all)
		if want := []string{"reject-unknown-domains"}; !slices.Equal(got, want) {
			t.Errorf("unknownFlags: got %q, want %q", got, want)
		}
	})

	// A command's help names its own flags only.
	for _, c := range commands {
		t.Run("help "+c.name, func(t *testing.T) {
			var b bytes.Buffer
			c.usage(&b)
			report(t, "bouncer help "+c.name, b.String(), byCommand[c.name])
		})
	}

	t.Run("metric help", func(t *testing.T) {
		r := &helpRecorder{reg: prometheus.NewRegistry()}
		metrics.New(r)
		metrics.RegisterBuildInfo(r)
		gateway.NewMetrics(r)
		r.MustRegister(newRedisCollector(nil), newHybridCollector(nil))
		if len(r.help) < 10 {
			t.Fatalf("read the help of %d metrics, want every one (more than 10)", len(r.help))
		}
		for name, help := range r.help {
			report(t, name+"'s help", help, all)
		}
	})

	// Every string in the module's code: flags' usage, messages, errors.
	t.Run("code", func(t *testing.T) {
		n := 0
		err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && (d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "../.."):
				return filepath.SkipDir // bench is a module of its own
			case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			n++
			ast.Inspect(f, func(node ast.Node) bool {
				if lit, ok := node.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						report(t, path, s, all)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 50 {
			t.Fatalf("read %d Go files, want the module's", n)
		}
	})

	for _, page := range []string{"docs/operations.md", "docs/running.md", "docs/observing.md", "docs/reloading.md", "docs/failures.md", "docs/configuration.md", "docs/gateway.md", "docs/hybrid.md",
		"docs/middleware.md", "docs/changes.md", "docs/benchmarks.md", "docs/algorithms.md", "README.md"} {
		t.Run(page, func(t *testing.T) {
			b, err := os.ReadFile("../../" + page)
			if err != nil {
				t.Fatal(err)
			}
			report(t, page, string(b), all)
		})
	}
}

// helpRecorder is a Registerer that keeps the help of every metric
// registered through it.
type helpRecorder struct {
	reg  *prometheus.Registry
	help map[string]string
}

// descHelp reads a Desc's name and help from its String, the only way
// client_golang shows them.
var descHelp = regexp.MustCompile(`fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*")`)

func (r *helpRecorder) Register(c prometheus.Collector) error {
	if r.help == nil {
		r.help = map[string]string{}
	}
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for d := range descs {
		if m := descHelp.FindStringSubmatch(d.String()); m != nil {
			name, _ := strconv.Unquote(m[1])
			r.help[name], _ = strconv.Unquote(m[2])
		}
	}
	return r.reg.Register(c)
}

func (r *helpRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *helpRecorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }
