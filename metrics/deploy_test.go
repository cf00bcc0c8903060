package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/bouncerhq/bouncer/gateway"
)

// metricName matches the Bouncer metrics a PromQL expression queries.
var metricName = regexp.MustCompile(`\bbouncer_[a-z_]+`)

// redisMetricsFile registers the Redis store's collector. It is in package
// main, which this package cannot import, so its names are read from its
// source: prometheus.NewDesc("bouncer_...", ...).
const redisMetricsFile = "../cmd/bouncer/redismetrics.go"

var newDesc = regexp.MustCompile(`prometheus\.NewDesc\("(bouncer_[a-z_]+)"`)

// recorder is a Registerer that keeps the name of every metric registered
// through it, described or not yet observed, and registers it on reg.
type recorder struct {
	reg   *prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// exported returns the name of every metric Bouncer exports: those of
// New, RegisterBuildInfo, gateway.NewMetrics, and the Redis collector.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	r := &recorder{reg: prometheus.NewRegistry(), names: map[string]bool{}}
	New(r)
	RegisterBuildInfo(r)
	gateway.NewMetrics(r)
	src, err := os.ReadFile(redisMetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	redis := newDesc.FindAllSubmatch(src, -1)
	// The regexp must still match what the file does.
	if len(redis) < 5 {
		t.Fatalf("%s: found %d prometheus.NewDesc(\"bouncer_...\") calls, want the Redis collector's (at least 5)", redisMetricsFile, len(redis))
	}
	for _, m := range redis {
		r.names[string(m[1])] = true
	}
	for _, want := range []string{"bouncer_decisions_total", "bouncer_gateway_requests_total", "bouncer_redis_breaker_open"} {
		if !r.names[want] {
			t.Fatalf("the exported names %v lack %s", r.names, want)
		}
	}
	return r.names
}

// queried returns the Bouncer metrics expr names, a histogram's series
// (_bucket, _sum, _count) under the histogram's name when names lacks them.
func queried(expr string, names map[string]bool) []string {
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		if !names[n] {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && names[base] {
					n = base
				}
			}
		}
		out = append(out, n)
	}
	return out
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules checks that deploy/alerts.yaml parses as Prometheus rule
// groups, that every alert is complete, and that every metric it queries is
// one Bouncer exports.
func TestAlertRules(t *testing.T) {
	names := exported(t)
	data, err := os.ReadFile("../deploy/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("deploy/alerts.yaml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				alerts = append(alerts, r.Alert)
				if r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
					t.Errorf("got expr %q, severity %q, summary %q; want all three", r.Expr, r.Labels["severity"], r.Annotations["summary"])
				}
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("for: %v", err)
				}
				got := queried(r.Expr, names)
				if len(got) == 0 {
					t.Errorf("expr %q queries no bouncer_ metric", r.Expr)
				}
				for _, n := range got {
					if !names[n] {
						t.Errorf("expr queries %s, which Bouncer does not export", n)
					}
				}
			})
		}
	}
	for _, want := range []string{"BouncerDegradedDecisions", "BouncerRedisBreakerOpen", "BouncerConfigReloadFailed", "BouncerDenialSpike", "BouncerGatewayUpstreamDown"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts %q lack %s", alerts, want)
		}
	}
}

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboard checks that deploy/grafana-dashboard.json parses, that
// every panel queries something, and that every metric its panels and
// variables query is one Bouncer exports.
func TestDashboard(t *testing.T) {
	names := exported(t)
	data, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	var exprs []string
	for _, v := range d.Templating.List {
		exprs = append(exprs, v.Query)
	}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if len(queried(tg.Expr, names)) == 0 {
				t.Errorf("panel %q: expr %q queries no bouncer_ metric", p.Title, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, e := range exprs {
		for _, n := range queried(e, names) {
			if !names[n] {
				t.Errorf("%q queries %s, which Bouncer does not export", e, n)
			}
		}
	}
	for _, want := range []string{"Decisions/s by rule and result", "Degraded decisions/s", "Denials/s by rule", "Store check latency",
		"Redis breaker state per node", "Config reloads and failures", "Gateway requests/s by route and code", "Gateway upstream health"} {
		if !slices.Contains(titles, want) {
			t.Errorf("panels %q lack %q", titles, want)
		}
	}
}

// TestQueried checks the extraction on its own: a histogram's series
// count as the histogram, and an unknown name stays as it is.
func TestQueried(t *testing.T) {
	names := map[string]bool{"bouncer_store_check_seconds": true, "bouncer_calls_count": true}
	got := queried(`rate(bouncer_store_check_seconds_bucket[5m]) / bouncer_calls_count + bouncer_nope_sum + up`, names)
	want := []string{"bouncer_store_check_seconds", "bouncer_calls_count", "bouncer_nope_sum"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
