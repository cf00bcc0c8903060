package header

import (
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// pol builds an expected Policy of the default unit.
func pol(name string, q int64, w time.Duration) Policy {
	return Policy{Name: name, Quota: q, Window: w, QuotaUnit: DefaultQuotaUnit}
}

func TestParsePolicies(t *testing.T) {
	withKey := func(p Policy, key string) Policy { p.PartitionKey = []byte(key); return p }
	withUnit := func(p Policy, unit string) Policy { p.QuotaUnit = unit; return p }
	tests := []struct {
		name  string
		lines []string
		want  []Policy
	}{
		// The draft's examples.
		{"two policies", []string{`"burst";q=100;w=60,"daily";q=1000;w=86400`},
			[]Policy{pol("burst", 100, time.Minute), pol("daily", 1000, 24*time.Hour)}},
		{"one", []string{`"default";q=100;w=10`}, []Policy{pol("default", 100, 10*time.Second)}},
		{"partition key, non-zero pad bits", []string{`"peruser";q=100;w=60;pk=:cHsdsRa894==:`},
			[]Policy{withKey(pol("peruser", 100, time.Minute), "p{\x1d\xb1\x16\xbc\xf7")}},
		{"quota unit and partition key", []string{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`},
			[]Policy{withKey(withUnit(pol("peruser", 65535, 10*time.Second), "content-bytes"), "\xb1\xd7\xe3,\x95\x0eP")}},
		{"space after the comma", []string{`"hour";q=1000;w=3600, "day";q=5000;w=86400`},
			[]Policy{pol("hour", 1000, time.Hour), pol("day", 5000, 24*time.Hour)}},
		{"several lines, unknown parameters ignored", []string{`"sliding";q=100;w=60;burst=1000`, `"fixed";q=5000;w=3600;burst=0`},
			[]Policy{pol("sliding", 100, time.Minute), pol("fixed", 5000, time.Hour)}},

		// Syntax the draft allows or RFC 9651 defines.
		{"no window", []string{`"p";q=5`}, []Policy{pol("p", 5, 0)}},
		{"a token name, as earlier drafts wrote", []string{`burst;q=100;w=60`}, []Policy{pol("burst", 100, time.Minute)}},
		{"a token quota unit", []string{`"p";q=1;qu=content-bytes`}, []Policy{withUnit(pol("p", 1, 0), "content-bytes")}},
		{"escapes in the name", []string{`"a\"b\\c";q=1`}, []Policy{pol(`a"b\c`, 1, 0)}},
		{"parameters of every type ignored", []string{`"p";q=1;a=1.5;b;c=?0;d=@1659578233;e=%"f%c3%bc";f=tok/en:x;g=:AA==:;h="s"`},
			[]Policy{pol("p", 1, 0)}},
		{"a key given twice keeps the last value", []string{`"p";q=1;q=2`}, []Policy{pol("p", 2, 0)}},
		{"padding left out", []string{`"p";q=1;pk=:QXBwLTk5OQ:`}, []Policy{withKey(pol("p", 1, 0), "App-999")}},
		{"empty partition key", []string{`"p";q=1;pk=::`}, []Policy{pol("p", 1, 0)}},
		{"tabs and spaces around members", []string{" \t\"a\";q=1 \t,\t \"b\";q=2 \t"}, []Policy{pol("a", 1, 0), pol("b", 2, 0)}},
		{"empty lines dropped", []string{"", `"a";q=1`, " ", `"b";q=2`}, []Policy{pol("a", 1, 0), pol("b", 2, 0)}},
		{"15 digits", []string{`"p";q=999999999999999;w=999999999999999`}, []Policy{pol("p", 999999999999999, math.MaxInt64)}},
		{"an inner list is skipped", []string{`("a" "b");q=1, "c";q=2`}, []Policy{pol("c", 2, 0)}},

		// Members left out.
		{"no quota", []string{`"a";w=1, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"decimal quota", []string{`"a";q=1.5, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"string quota", []string{`"a";q="1", "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"boolean quota", []string{`"a";q, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"negative quota", []string{`"a";q=-1, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"zero window", []string{`"a";q=1;w=0, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"decimal window", []string{`"a";q=1;w=1.0, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"integer unit", []string{`"a";q=1;qu=1, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"empty unit", []string{`"a";q=1;qu="", "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"string partition key", []string{`"a";q=1;pk="k", "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"integer name", []string{`1;q=1, "b";q=2`}, []Policy{pol("b", 2, 0)}},
		{"byte sequence name", []string{`:AA==:;q=1, "b";q=2`}, []Policy{pol("b", 2, 0)}},

		// Fields ignored whole.
		{"trailing comma", []string{`"a";q=1,`}, nil},
		{"leading comma", []string{`,"a";q=1`}, nil},
		{"no comma", []string{`"a";q=1 "b";q=2`}, nil},
		{"empty parameter", []string{`"a";q=1;;w=1`}, nil},
		{"unterminated string", []string{`"a;q=1`}, nil},
		{"bad escape", []string{`"a\n";q=1`}, nil},
		{"non-ASCII", []string{`"é";q=1`}, nil},
		{"control byte in a string", []string{"\"a\x01\";q=1"}, nil},
		{"upper-case key", []string{`"a";Q=1`}, nil},
		{"16 digits", []string{`"a";q=1000000000000000`}, nil},
		{"13 digits before the point", []string{`"a";q=1;x=1234567890123.5`}, nil},
		{"4 digits after the point", []string{`"a";q=1;x=1.2345`}, nil},
		{"a point ending a number", []string{`"a";q=1;x=1.`}, nil},
		{"a lone minus", []string{`"a";q=1;x=-`}, nil},
		{"bad base64", []string{`"a";q=1;pk=:a:`}, nil},
		{"bad padding", []string{`"a";q=1;pk=:QQ=:`}, nil},
		{"unterminated byte sequence", []string{`"a";q=1;pk=:QQ==`}, nil},
		{"bad boolean", []string{`"a";q=1;x=?2`}, nil},
		{"decimal date", []string{`"a";q=1;x=@1.5`}, nil},
		{"display string with upper-case hex", []string{`"a";q=1;x=%"%C3%BC"`}, nil},
		{"display string not UTF-8", []string{`"a";q=1;x=%"%ff"`}, nil},
		{"unterminated inner list", []string{`("a" "b"`}, nil},
		{"one bad line spoils the field", []string{`"a";q=1`, `"b";q=`}, nil},

		{"empty", []string{""}, nil},
		{"no lines", nil, nil},
		{"blank", []string{"  \t "}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParsePolicies(tt.lines); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePolicies(%q):\ngot  %+v\nwant %+v", tt.lines, got, tt.want)
			}
		})
	}
}

func TestParseRateLimit(t *testing.T) {
	item := func(name string, r int64, reset time.Duration) Item {
		return Item{Name: name, Remaining: r, Reset: reset, HasRemaining: true, HasReset: true}
	}
	tests := []struct {
		name  string
		lines []string
		want  []Item
	}{
		// The draft's examples.
		{"one", []string{`"default";r=50;t=30`}, []Item{item("default", 50, 30*time.Second)}},
		{"no reset, a partition key", []string{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`},
			[]Item{{Name: "default", Remaining: 999, PartitionKey: []byte("trial121323"), HasRemaining: true}}},
		{"reset and partition key", []string{`"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`},
			[]Item{{Name: "default", Remaining: 300000000, Reset: time.Minute, PartitionKey: []byte("App-999"), HasRemaining: true, HasReset: true}}},
		{"an unknown parameter", []string{`"sliding";q=12;r=6;t=1`}, []Item{item("sliding", 6, time.Second)}},
		{"no space after the colon", []string{`"default";r=50;t=60`}, []Item{item("default", 50, time.Minute)}},

		{"several lines", []string{`"a";r=1;t=2`, `"b";r=3;t=4, "c";r=5;t=6`},
			[]Item{item("a", 1, 2*time.Second), item("b", 3, 4*time.Second), item("c", 5, 6*time.Second)}},
		{"no remaining: kept, marked", []string{`"a";t=5`}, []Item{{Name: "a", Reset: 5 * time.Second, HasReset: true}}},
		{"zero reset", []string{`"a";r=0;t=0`}, []Item{item("a", 0, 0)}},
		{"a reset too long for a Duration", []string{`"a";r=1;t=999999999999999`}, []Item{item("a", 1, math.MaxInt64)}},

		{"negative remaining", []string{`"a";r=-1;t=1, "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},
		{"negative reset", []string{`"a";r=1;t=-1, "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},
		{"decimal reset", []string{`"a";r=1;t=1.5, "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},
		{"string remaining", []string{`"a";r="1", "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},
		{"token partition key", []string{`"a";r=1;pk=abc, "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},
		{"inner list", []string{`("a");r=1, "b";r=1;t=1`}, []Item{item("b", 1, time.Second)}},

		{"16 digits", []string{`"a";r=1000000000000000`}, nil},
		{"malformed", []string{`"a";r=1;t=1;`}, nil},
		{"one bad line spoils the field", []string{`"a";r=1`, `"b";r=1,,`}, nil},
		{"empty", []string{""}, nil},
		{"no lines", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRateLimit(tt.lines); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRateLimit(%q):\ngot  %+v\nwant %+v", tt.lines, got, tt.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 27, 30, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"120", 120 * time.Second, true},
		{" 5\t", 5 * time.Second, true},
		{"0", 0, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999", math.MaxInt64, true},
		{"9223372037", math.MaxInt64, true},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 30 * time.Second, true},     // IMF-fixdate
		{"Wednesday, 21-Oct-15 07:28:00 GMT", 30 * time.Second, true}, // RFC 850
		{"Wed Oct 21 07:28:00 2015", 30 * time.Second, true},          // asctime
		{"Wed, 21 Oct 2015 07:00:00 GMT", 0, true},                    // past
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1 2", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"Wed, 21 Oct 2015 07:28:00", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q): got %v %v, want %v %v", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseLegacy(t *testing.T) {
	const date = "Wed, 21 Oct 2015 07:28:00 GMT" // Unix 1445412480
	tests := []struct {
		name string
		h    map[string]string
		want Legacy
		ok   bool
	}{
		{"delta seconds", map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "30"},
			Legacy{100, 42, 30 * time.Second}, true},
		{"1e9 is still delta seconds", map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1000000000"},
			Legacy{0, 0, 1e9 * time.Second}, true},
		{"a Unix time, from Date", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1445412525", "Date": date},
			Legacy{5000, 0, 45 * time.Second}, true},
		{"a Unix time past", map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1445412000", "Date": date},
			Legacy{0, 0, 0}, true},
		{"a Unix time without Date", map[string]string{"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "1445412525"},
			Legacy{0, 3, 0}, true},
		{"a Unix time far away", map[string]string{"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "9223372036854775807", "Date": date},
			Legacy{0, 3, math.MaxInt64}, true},
		{"remaining alone", map[string]string{"X-RateLimit-Remaining": " 5 "}, Legacy{0, 5, 0}, true},

		{"no remaining", map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Reset": "30"}, Legacy{}, false},
		{"empty remaining", map[string]string{"X-RateLimit-Remaining": ""}, Legacy{}, false},
		{"negative remaining", map[string]string{"X-RateLimit-Remaining": "-1"}, Legacy{}, false},
		{"malformed limit", map[string]string{"X-RateLimit-Limit": "lots", "X-RateLimit-Remaining": "1"}, Legacy{}, false},
		{"a list as limit", map[string]string{"X-RateLimit-Limit": "100, 1000", "X-RateLimit-Remaining": "1"}, Legacy{}, false},
		{"decimal reset", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1.5"}, Legacy{}, false},
		{"reset out of range", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "99999999999999999999"}, Legacy{}, false},
		{"none", nil, Legacy{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.h {
				h.Set(k, v)
			}
			got, ok := ParseLegacy(h)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseLegacy(%v): got %+v %v, want %+v %v", tt.h, got, ok, tt.want, tt.ok)
			}
		})
	}
}
