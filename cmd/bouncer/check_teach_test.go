package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckTeaches asserts whole outputs of bouncer check: one line per
// problem, in the config's words, without the package's prefix.
func TestCheckTeaches(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rulez := write("rulez.yaml", "domain: d\nrulez:\n  - name: r\n")
	frac := write("frac.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 0.5, period: 1s}]\n")
	empty := t.TempDir()
	tab := write("tab.yaml", "domain: d\nrules:\n  - name: r\n\tmatch: [{key: a}]\n")
	algo := write("algo.yaml", "domain: d\nrules:\n  - name: r\n    algorithm: tokenbucket\n    match: [{key: a}]\n    limits:\n      - {rate: 1, period: 1s}\n      - {rate: 2, period: 1m}\n")
	rate := write("rate.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits:\n      - {rate: 10.5, period: 1s}\n")
	rpu := write("rpu.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1.5\n")
	burst := write("burst.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 1, period: 1s, burst: 0}]\n")
	bracket := write("bracket.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}\n    limits: [{rate: 1, period: 1s}]\n")
	unit := write("unit.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n      unit: minutes\n")
	negative := write("negative.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: -1\n")
	perSecond := write("persecond.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 10/s}]\n")
	noPeriod := write("noperiod.yaml", "domain: d\nrules:\n  - name: r\n    match: [{key: a}]\n    limits: [{rate: 10}]\n")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"two paths", []string{"a.yaml", "dir/"}, exitUsage, "bouncer check takes one path, a file or a directory; got 2\n\n"},
		{"a flag", []string{"-v"}, exitUsage, "bouncer check takes no flag but --mode, --on-store-error and --regions; got -v\n\n"},
		{"misspelt rules", []string{rulez}, exitFail, rulez + `:2: top level: unknown field "rulez" (did you mean rules?); read as envoyproxy/ratelimit's format: the file has no top-level rules` + "\n"},
		{"fractional rate", []string{frac}, exitFail, frac + ":5: rules[0].limits[0].rate: want a whole number, got 0.5: for 0.5 per 1s write rate: 1, period: 2s\n"},
		{"unknown algorithm on a rule, once at its line", []string{algo}, exitFail, algo + `:4: rules[0].algorithm: unknown algorithm "tokenbucket" (did you mean token_bucket?); want one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter` + "\n"},
		{"fractional rate above 1", []string{rate}, exitFail, rate + ":6: rules[0].limits[0].rate: want a whole number, got 10.5: for 10.5 per 1s write rate: 21, period: 2s\n"},
		{"fractional requests_per_unit", []string{rpu}, exitFail, rpu + ":6: descriptors[0].rate_limit.requests_per_unit: want a whole number, got 1.5\n"},
		{"a rate with its period", []string{perSecond}, exitFail, perSecond + `:5: rules[0].limits[0].rate: must be a number, got "10/s"; write rate: 10, period: 1s` + "\n"},
		{"no period", []string{noPeriod}, exitFail, noPeriod + ":5: rules[0].limits[0]: period is required: write the time the rate is counted over, such as period: 1s, 1m or 1d\n"},
		{"burst 0", []string{burst}, exitFail, burst + ":5: rules[0].limits[0].burst: must be at least 1, got 0\n"},
		{"an unclosed [", []string{bracket}, exitFail, bracket + ":4: not valid YAML: did not find expected ',' or ']'\n"},
		{"an unknown unit", []string{unit}, exitFail, unit + ":6: descriptors[0].rate_limit.unit: invalid rate limit unit 'minutes' (did you mean minute?); want second, minute, hour, day, week, month or year\n"},
		{"negative requests_per_unit, once", []string{negative}, exitFail, negative + ":6: descriptors[0].rate_limit.requests_per_unit: -1 is not between 0 and 4294967295\n"},
		{"a tab", []string{tab}, exitFail, tab + ":4: not valid YAML: found a tab character that violates indentation\n"},
		{"no such file", []string{filepath.Join(dir, "nope.yaml")}, exitFail, "stat " + filepath.Join(dir, "nope.yaml") + ": no such file or directory\n"},
		{"no yaml in a directory", []string{empty}, exitFail, "no *.yaml or *.yml files in " + empty + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := runCheck(c.args, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit code: got %d, want %d", code, c.code)
			}
			got := stderr.String()
			if c.code == exitUsage {
				got = got[:min(len(got), len(c.stderr))]
			}
			if got != c.stderr {
				t.Errorf("stderr: got %q, want %q", got, c.stderr)
			}
		})
	}
}

// TestCheckPrintsModeBounds asserts that bouncer check prints, for each
// limit, how far over it the instances can admit in its mode and while
// Redis is down under its store-error policy: the file's own modes and
// policies, and those --mode and --on-store-error give.
func TestCheckPrintsModeBounds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.yaml")
	cfg := "domain: d\nrules:\n  - name: api\n    match: [{key: user}]\n    mode: lease\n    limits:\n      - {name: s, rate: 10, period: 1s, algorithm: gcra, burst: 20}\n  - name: api_hourly\n    match: [{key: team}]\n    mode: lease\n    on_store_error: deny\n    limits:\n      - {name: w, rate: 1000, period: 1h, algorithm: fixed_window}\n  - name: ip\n    match: [{key: ip}]\n    limits:\n      - {name: m, rate: 100, period: 1m, algorithm: fixed_window}\n  - name: ip_open\n    match: [{key: ipo}]\n    on_store_error: allow\n    limits:\n      - {name: o, rate: 300, period: 2s, algorithm: fixed_window}\n"
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const (
		leaseS  = ":3: api, limit s: lease: at most 10 more than 10 per 1s with a burst of 20 (what refills in a lease of 1s); while Redis is down, with on_store_error %s: up to instances x 10 per 1s with a burst of 20, each instance limiting on its own, plus what the leases already taken hold\n"
		leaseW  = ":8: api_hourly, limit w: lease: never more than 1000 per 1h0m0s; while Redis is down, with on_store_error deny: only what the leases already taken hold, within the bound above\n"
		strictM = ":14: ip, limit m: strict: never more than 100 per 1m0s; while Redis is down, with on_store_error %s\n"
		asyncM  = ":14: ip, limit m: async: near the limit, instances share 100 per 1m0s by demand: at most 1 more a window an instance; a key new to an instance, at most (instances - 1) x 100 more (what one instance can admit on its own between syncs); while Redis is down, with on_store_error %s\n"
		localM  = "local: up to instances x 100 per 1m0s, each instance limiting on its own"
		strictO = ":18: ip_open, limit o: strict: never more than 300 per 2s; while Redis is down, with on_store_error allow: no limit (every request is allowed)\n"
		asyncO  = ":18: ip_open, limit o: async: near the limit, instances share 300 per 2s by demand: at most 1 more a window an instance; a key new to an instance, at most (instances - 1) x 300 more (what one instance can admit on its own between syncs); while Redis is down, with on_store_error allow: no limit (every request is allowed)\n"
		header  = "domain d (bouncer semantics): 4 rules, from "
	)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{p}, header + p + "\n" +
			"  " + p + fmt.Sprintf(leaseS, "local") + "  " + p + leaseW +
			"  " + p + fmt.Sprintf(strictM, localM) + "  " + p + strictO},
		{[]string{"--mode", "async", p}, header + p + "\n" +
			"  " + p + fmt.Sprintf(leaseS, "local") + "  " + p + leaseW +
			"  " + p + fmt.Sprintf(asyncM, localM) + "  " + p + asyncO},
		{[]string{"--on-store-error=deny", "--mode=async", p}, header + p + "\n" +
			"  " + p + ":3: api, limit s: lease: at most 10 more than 10 per 1s with a burst of 20 (what refills in a lease of 1s); while Redis is down, with on_store_error deny: only what the leases already taken hold, within the bound above\n" +
			"  " + p + leaseW +
			"  " + p + fmt.Sprintf(asyncM, "deny: nothing admitted") + "  " + p + asyncO},
		{[]string{"--on-store-error", "allow", p}, header + p + "\n" +
			"  " + p + ":3: api, limit s: lease: at most 10 more than 10 per 1s with a burst of 20 (what refills in a lease of 1s); while Redis is down, with on_store_error allow: no limit (every request is allowed)\n" +
			"  " + p + leaseW +
			"  " + p + fmt.Sprintf(strictM, "allow: no limit (every request is allowed)") + "  " + p + strictO},
	}
	for _, c := range cases {
		var stdout, stderr strings.Builder
		if code := runCheck(c.args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
		got, _, _ := strings.Cut(stdout.String(), "ok: ")
		if got != c.want {
			t.Errorf("%v: got\n%s\nwant\n%s", c.args, got, c.want)
		}
	}
	// Across three regions a fixed window is global, in async mode and in
	// lease mode, and so are a GCRA limit in lease and in async mode; a
	// shaping leaky bucket is each region's own.
	var asyncOut, asyncErr strings.Builder
	gdir := t.TempDir()
	writeConfig(t, gdir, "g.yaml", "domain: d\nrules:\n  - name: g\n    match: [{key: user}]\n    limits:\n      - {name: g, rate: 10, period: 1s, algorithm: gcra, burst: 20}\n  - name: c\n    match: [{key: conn}]\n    limits:\n      - {name: c, rate: 5, period: 1s, algorithm: leaky_bucket, shape: true}\n")
	if code := runCheck([]string{"--mode", "async", "--regions", "3", filepath.Join(gdir, "g.yaml")}, &asyncOut, &asyncErr); code != exitOK {
		t.Fatalf("an async GCRA limit, --regions 3: exit %d, stderr %q", code, asyncErr.String())
	}
	if want := "limit g: async: "; !strings.Contains(asyncOut.String(), want) ||
		!strings.Contains(asyncOut.String(), "; across 3 regions, global: each region's Redis is charged with the others' admissions, and near the limit the regions share 10 per 1s with a burst of 20 by demand, as the instances of one do; a region cut off keeps its last share, past --region-ttl its static share of 3\n") {
		t.Errorf("an async GCRA limit, --regions 3: got\n%s", asyncOut.String())
	}
	if want := "; across 3 regions, each region's own (a shaping leaky bucket is never global): up to 3 x "; !strings.Contains(asyncOut.String(), want) {
		t.Errorf("a shaping leaky bucket, --regions 3: output lacks %q:\n%s", want, asyncOut.String())
	}
	var stdout, stderr strings.Builder
	if code := runCheck([]string{"--mode", "async", "--regions", "3", p}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--regions 3: exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{
		"limit m: async: near the limit, instances share 100 per 1m0s by demand",
		"; across 3 regions, global: near the limit the regions share 100 per 1m0s by demand, as the instances of one do; a region cut off keeps its last share, past --region-ttl its static share of 33\n",
		"limit w: lease: never more than 1000 per 1h0m0s; while Redis is down, with on_store_error deny: only what the leases already taken hold, within the bound above; across 3 regions, global: near the limit the regions share 1000 per 1h0m0s by demand, as the instances of one do (each region's Redis deciding in lease mode, each instance held to its share); a region cut off keeps its last share, past --region-ttl its static share of 333\n",
		"limit s: lease: at most 10 more than 10 per 1s with a burst of 20 (what refills in a lease of 1s); while Redis is down, with on_store_error local: up to instances x 10 per 1s with a burst of 20, each instance limiting on its own, plus what the leases already taken hold; across 3 regions, global: each region's Redis is charged with the others' admissions, and near the limit the regions share 10 per 1s with a burst of 20 by demand, as the instances of one do (each region's Redis deciding in lease mode, each instance held to its share); a region cut off keeps its last share, past --region-ttl its static share of 3\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--regions 3: output lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, bad := range []string{"0", "65", "x"} {
		var stdout, stderr strings.Builder
		if code := runCheck([]string{"--regions", bad, p}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--regions: want 1 to 64") {
			t.Errorf("--regions %s: exit %d, stderr %q", bad, code, stderr.String())
		}
	}
	for _, bad := range [][]string{{"--mode=fast", p}, {"--on-store-error", "open", p}, {"--on-store-error=", p}} {
		var stdout, stderr strings.Builder
		want := `--mode: want strict, lease or async, got "fast"`
		if bad[0] != "--mode=fast" {
			want = "--on-store-error: want local, allow or deny, got"
		}
		if code := runCheck(bad, &stdout, &stderr); code != exitUsage || !strings.HasPrefix(stderr.String(), want) {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr.String())
		}
	}
}

// bouncer check recognises a gateway config and validates it as bouncer
// gateway loads it: the file, the rules file it names, and the gateway
// built from both; not as a rules file with unknown fields.
func TestCheckGatewayConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("rules.yaml", gatewayRules)
	write("broken.yaml", "domain: gw\nrules:\n  - name: global\n    match: [{key: generic_key}]\n    limits: [{rate: 1.5, period: 1s}]\n")
	route := strings.NewReplacer("ROUTE", "app", "UPSTREAM", "http://127.0.0.1:1")
	good := write("gateway.yaml", route.Replace(gatewayFile))
	badRules := write("badrules.yaml", strings.Replace(route.Replace(gatewayFile), "rules: rules.yaml", "rules: broken.yaml", 1))
	badAuth := write("badauth.yaml", route.Replace(gatewayFile)+"    auth: nobody\n")
	cases := []struct {
		name           string
		path           string
		code           int
		stdout, stderr string // substrings; "" for an empty stream
	}{
		{"valid", good, exitOK, "ok: gateway config " + good + ": 1 listeners, 1 routes; rules version ", ""},
		{"its rules file's problems", badRules, exitFail, "", filepath.Join(dir, "broken.yaml") + ":5: rules[0].limits[0].rate: want a whole number, got 1.5"},
		{"the gateway's own problems", badAuth, exitFail, "", badAuth + ":"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := runCheck([]string{c.path}, &stdout, &stderr); code != c.code {
				t.Errorf("exit code: got %d, want %d (stderr %q)", code, c.code, stderr.String())
			}
			for _, s := range []struct{ name, got, want string }{{"stdout", stdout.String(), c.stdout}, {"stderr", stderr.String(), c.stderr}} {
				if s.want == "" && s.got != "" && s.name == "stderr" || !strings.Contains(s.got, s.want) {
					t.Errorf("%s: got %q, want it to hold %q", s.name, s.got, s.want)
				}
			}
			if strings.Contains(stderr.String(), "unknown field") {
				t.Errorf("stderr reads the gateway config as a rules file: %q", stderr.String())
			}
		})
	}
}
