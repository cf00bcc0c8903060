package yamlconf

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestSuggest(t *testing.T) {
	known := []string{"rules", "plans", "client_ip", "domain", "path_prefix", "burst", "on_store_error"}
	cases := []struct{ in, want string }{
		{"rulez", "rules"},
		{"rule", "rules"},
		{"brust", "burst"},
		{"pth_prefix", "path_prefix"},
		{"path_prefx", "path_prefix"},
		{"on_store_eror", "on_store_error"},
		{"client-ip", "client_ip"},
		{"domian", "domain"},
		{"limits", ""},
		{"x", ""},
		{"descriptors", ""},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			if got := Suggest(c.in, known); got != c.want {
				t.Errorf("Suggest(%q): got %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	type limit struct {
		At       Pos
		Rate     int64  `yaml:"rate"`
		Count    uint32 `yaml:"count"`
		Burst    *int64 `yaml:"burst"`
		Name     string `yaml:"name"`
		NameAt   Pos    `yamlconf:"name"`
		Describe string `yaml:"describe"`
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"fraction", "rate: 10.5\n", []string{`2: rate: want a whole number, got 10.5`}},
		{"fraction, pointer", "burst: 1.5\n", []string{`2: burst: want a whole number, got 1.5`}},
		{"fraction, unsigned", "count: 0.5\n", []string{`2: count: want a whole number, got 0.5`}},
		{"exponent", "rate: 1e3\n", []string{`2: rate: want a whole number, got 1e3`}},
		{"not a number", "rate: many\n", []string{`2: rate: want a whole number, got "many"`}},
		{"whole", "rate: 10\nburst: 0\n", nil},
		{"near name", "brust: 3\n", []string{`2: top level: unknown field "brust" (did you mean burst?)`}},
		{"no near name", "shape: true\n", []string{`2: top level: unknown field "shape" (known: burst, count, describe, name, rate)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			d := Decoder{File: "f.yaml", Report: func(file string, line int, reason string) {
				got = append(got, fmt.Sprintf("%d: %s", line, reason))
			}}
			var n yaml.Node
			if err := yaml.Unmarshal([]byte("name: x\n"+c.yaml), &n); err != nil {
				t.Fatal(err)
			}
			var l limit
			d.Decode(&n, &l)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got %q, want %q", got, c.want)
			}
			if l.NameAt.Line != 1 || l.At.Line != 1 {
				t.Errorf("positions: got name at %d, limit at %d, want 1 and 1", l.NameAt.Line, l.At.Line)
			}
		})
	}
}

// A free-form field takes any shape, and reads scalars as a YAML 1.1
// reader (envoyproxy/ratelimit's) does where YAML 1.2 differs.
func TestFreeForm(t *testing.T) {
	const doc = `meta:
  nested: &x {deep: [1, true]}
  name: svc
  when: 2020-01-01
  on: yes
  quoted: "yes"
  off: Off
  n: 3
  big: 18446744073709551615
  ratio: 0.5
  none: ~
  list: [a, *x, {k: v}]
`
	var f struct {
		Meta any `yaml:"meta"`
	}
	var errs []string
	d := Decoder{File: "f.yaml", Report: func(file string, line int, reason string) {
		errs = append(errs, fmt.Sprintf("%d: %s", line, reason))
	}}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	d.Decode(&n, &f)
	if len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	got := fmt.Sprintf("%#v", f.Meta)
	nested := map[string]any{"deep": []any{1, true}}
	want := fmt.Sprintf("%#v", map[string]any{
		"name": "svc", "when": "2020-01-01", "on": true, "quoted": "yes", "off": false,
		"n": 3, "big": uint64(18446744073709551615), "ratio": 0.5, "none": nil,
		"list": []any{"a", nested, map[string]any{"k": "v"}}, "nested": nested,
	})
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	errs = nil
	if err := yaml.Unmarshal([]byte("meta: {a: 1, a: 2}\n"), &n); err == nil {
		d.Decode(&n, &f)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], `duplicate key "a"`) {
		t.Errorf("a duplicate key: got %q, want one error naming it", errs)
	}
}

// TestInline checks that the fields of an embedded struct tagged
// `yaml:",inline"` are decoded as the outer mapping's, and named among
// its known fields.
func TestInline(t *testing.T) {
	type Inner struct {
		Name    string `yaml:"name"`
		Skipped string `yaml:"-"`
		Untyped string
	}
	type outer struct {
		At    Pos
		Inner `yaml:",inline"`
		Port  int `yaml:"port"`
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("name: a\nport: 8\n"), &doc); err != nil {
		t.Fatal(err)
	}
	var got outer
	d := Decoder{File: "f", Report: func(_ string, line int, reason string) { t.Errorf("line %d: %s", line, reason) }}
	d.Decode(doc.Content[0], &got)
	if got.Name != "a" || got.Port != 8 || got.At.Line != 1 {
		t.Errorf("got %+v, want name a, port 8 at line 1", got)
	}

	var problems []string
	d = Decoder{File: "f", Report: func(_ string, _ int, reason string) { problems = append(problems, reason) }}
	if err := yaml.Unmarshal([]byte("nmae: a\nSkipped: b\n"), &doc); err != nil {
		t.Fatal(err)
	}
	d.Decode(doc.Content[0], &outer{})
	want := []string{`top level: unknown field "nmae" (did you mean name?)`, `top level: unknown field "Skipped" (known: name, port)`}
	if fmt.Sprint(problems) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", problems, want)
	}
}
