package rules_test

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// modes returns the mode of every limit of c's domain d, by
// "rule.limit" (a rule's own limits) and "rule.plan.limit"; a rule of
// envoyproxy/ratelimit's format is named by its path.
func modes(c *rules.Config, d string) map[string]bouncer.Mode {
	out := map[string]bouncer.Mode{}
	for _, r := range c.Domain(d).Rules {
		name := cmp.Or(r.Name, r.Path)
		for _, l := range r.Limits {
			out[name+"."+l.Name] = l.Mode
		}
		for p, pl := range r.Plans {
			for _, l := range pl.Limits {
				out[name+"."+p+"."+l.Name] = l.Mode
			}
		}
	}
	return out
}

const modePlans = "domain: d\nplans: {key: plan}\nrules:\n"

func TestModes(t *testing.T) {
	const (
		strict = bouncer.Strict
		lease  = bouncer.Lease
		async  = bouncer.Async
	)
	cases := map[string]struct {
		o    rules.LoadOptions
		yaml string
		want map[string]bouncer.Mode
	}{
		"native: none is strict": {
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: s, rate: 1, period: 1s}]\n    plans: {pro: {limits: [{name: p, rate: 2, period: 1s}]}}\n",
			want: map[string]bouncer.Mode{"r.s": strict, "r.pro.p": strict},
		},
		"native: the rule's mode, for its limits and its plans'": {
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    mode: lease\n    limits: [{name: s, rate: 1, period: 1s}, {name: d, rate: 9, period: 1d, algorithm: fixed_window}]\n    plans: {pro: {limits: [{name: p, rate: 2, period: 1s}]}}\n",
			want: map[string]bouncer.Mode{"r.s": lease, "r.d": lease, "r.pro.p": lease},
		},
		"native: a limit's mode overrides the rule's": {
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    mode: async\n    limits: [{name: s, rate: 1, period: 1s, mode: strict}, {name: d, rate: 9, period: 1d}]\n    plans: {pro: {limits: [{name: p, rate: 2, period: 1s, mode: lease}]}}\n",
			want: map[string]bouncer.Mode{"r.s": strict, "r.d": async, "r.pro.p": lease},
		},
		"native: a limit's own mode, the rule naming none": {
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: s, rate: 1, period: 1s, mode: async}, {name: d, rate: 9, period: 1d}]\n",
			want: map[string]bouncer.Mode{"r.s": async, "r.d": strict},
		},
		"native: the load's default, below the rule's and the limit's": {
			o:    rules.LoadOptions{Mode: async},
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: s, rate: 1, period: 1s}, {name: d, rate: 9, period: 1d, mode: lease}]\n  - name: q\n    match: [{key: b}]\n    mode: strict\n    limits: [{name: s, rate: 1, period: 1s}]\n",
			want: map[string]bouncer.Mode{"r.s": async, "r.d": lease, "q.s": strict},
		},
		"native: the load's default leaves concurrency and shaping strict": {
			o:    rules.LoadOptions{Mode: lease, AllowConcurrency: true},
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: c, rate: 5, period: 1m, algorithm: concurrency}, {name: sh, rate: 5, period: 1s, algorithm: leaky_bucket, shape: true}, {name: lb, rate: 5, period: 1s, algorithm: leaky_bucket}]\n",
			want: map[string]bouncer.Mode{"r.c": strict, "r.sh": strict, "r.lb": lease},
		},
		"native: a default of lease leaves the sliding windows strict, async does not": {
			o:    rules.LoadOptions{Mode: lease},
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: l, rate: 5, period: 1s, algorithm: sliding_window_log}, {name: c, rate: 5, period: 1s, algorithm: sliding_window_counter}, {name: f, rate: 5, period: 1s}]\n",
			want: map[string]bouncer.Mode{"r.l": strict, "r.c": strict, "r.f": lease},
		},
		"native: a default of async reaches the sliding windows": {
			o:    rules.LoadOptions{Mode: async},
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{name: l, rate: 5, period: 1s, algorithm: sliding_window_log}]\n",
			want: map[string]bouncer.Mode{"r.l": async},
		},
		"envoy: mode under semantics bouncer": {
			yaml: "domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, mode: lease}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 5, mode: async}\n  - key: c\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
			want: map[string]bouncer.Mode{"a.per_second": lease, "b.per_second": async, "c.per_second": strict},
		},
		"envoy: the load's default; a rate of 0 stays strict": {
			o:    rules.LoadOptions{Mode: async},
			yaml: "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: z\n    rate_limit: {unit: minute, requests_per_unit: 0}\n",
			want: map[string]bouncer.Mode{"a.per_minute": async, "z.per_minute": strict},
		},
		"envoy: the file's mode over the load's, which leaves shaping strict": {
			o:    rules.LoadOptions{Mode: lease},
			yaml: "domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, mode: strict}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: leaky_bucket, shape: true}\n  - key: c\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra}\n",
			want: map[string]bouncer.Mode{"a.per_second": strict, "b.per_second": strict, "c.per_second": lease},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := c.o.Parse("c.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := modes(cfg, "d")
			if !maps.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestModeErrors(t *testing.T) {
	cases := map[string]struct {
		o    rules.LoadOptions
		yaml string
		want []string // "line: reason fragment"
		not  []string // fragments no problem has
	}{
		"native: unknown mode of a rule, said once at its line": {
			yaml: "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    mode: fast\n    limits:\n      - {rate: 1, period: 1s}\n      - {rate: 2, period: 1s, mode: lease}\n",
			want: []string{`5: rules[0].mode: unknown mode "fast" (want strict, lease or async)`},
			not:  []string{"limits[0]", "limits[1]"},
		},
		"native: unknown mode of a plan's limit": {
			yaml: modePlans + "  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s}]\n    plans:\n      pro:\n        limits:\n          - rate: 2\n            period: 1s\n            mode: Lease\n",
			want: []string{`12: rules[0].plans.pro.limits[0].mode: unknown mode "Lease"`},
		},
		"native: lease on a concurrency limit": {
			o:    rules.LoadOptions{AllowConcurrency: true},
			yaml: "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1m, algorithm: concurrency, mode: lease}\n",
			want: []string{"6: rules[0].limits[0].mode: concurrency is always strict, got lease"},
		},
		"native: the rule's async reaches its concurrency limit": {
			o:    rules.LoadOptions{AllowConcurrency: true},
			yaml: "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    mode: async\n    limits:\n      - {rate: 1, period: 1s}\n      - {rate: 1, period: 1m, algorithm: concurrency}\n",
			want: []string{"8: rules[0].limits[1].mode: concurrency is always strict, got async"},
			not:  []string{"limits[0]"},
		},
		"native: lease on a shaping leaky bucket": {
			yaml: "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1s, algorithm: leaky_bucket, shape: true, mode: lease}\n",
			want: []string{"6: rules[0].limits[0].mode: a shaping leaky_bucket is always strict, got lease"},
		},
		"envoy: mode without semantics bouncer": {
			yaml: "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      mode: lease\n",
			want: []string{"5: algorithm, burst, shape, on_store_error, charge_denied and mode need 'semantics: bouncer'"},
		},
		"envoy: unknown mode": {
			yaml: "domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      mode: lazy\n",
			want: []string{`8: descriptors[0].rate_limit.mode: unknown mode "lazy" (want strict, lease or async)`},
		},
		"envoy: async on a concurrency limit": {
			o:    rules.LoadOptions{AllowConcurrency: true},
			yaml: "domain: d\nsemantics: bouncer\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: concurrency\n      mode: async\n",
			want: []string{"6: descriptors[0].rate_limit.mode: concurrency is always strict, got async"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.o.Parse("c.yaml", []byte(c.yaml))
			if _, ok := errors.AsType[*rules.ConfigError](err); !ok {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), "c.yaml:"+w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, "c.yaml:"+w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error\n%v\ncontains %q, want it said once, at the rule", err, n)
				}
			}
		})
	}
}

// A default that is no mode is the caller's mistake, not the file's.
func TestLoadOptionsModeInvalid(t *testing.T) {
	const yaml = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5}\n"
	_, err := rules.LoadOptions{Mode: bouncer.Async + 1}.Parse("c.yaml", []byte(yaml))
	if err == nil || !strings.Contains(err.Error(), "LoadOptions.Mode: unknown mode 3") {
		t.Fatalf("got %v, want the unknown default mode refused", err)
	}
	if _, ok := errors.AsType[*rules.ConfigError](err); ok {
		t.Errorf("got a *ConfigError, want an error that blames no file")
	}
}

// recording records the modes of the limits each check carries.
type recording struct {
	bouncer.Limiter
	modes []string
}

func (r *recording) Check(ctx context.Context, req bouncer.Request) (bouncer.Decision, error) {
	for _, k := range req.Keys {
		for _, l := range k.Limits {
			r.modes = append(r.modes, l.Name+"="+l.Mode.String())
		}
	}
	return r.Limiter.Check(ctx, req)
}

// The engine hands the limiter each limit with its mode, which is what a
// hybrid limiter decides by.
func TestEngineChecksWithModes(t *testing.T) {
	const yaml = "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    mode: lease\n    limits: [{name: s, rate: 5, period: 1s}, {name: d, rate: 50, period: 1d, mode: async}]\n"
	cfg, err := rules.Parse("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	rec := &recording{Limiter: st}
	e := rules.NewEngine(cfg, rec)
	decide(t, e, "d", desc("a=1"))
	slices.Sort(rec.modes)
	if got, want := strings.Join(rec.modes, " "), "d=async s=lease"; got != want {
		t.Errorf("checked %q, want %q", got, want)
	}
}
