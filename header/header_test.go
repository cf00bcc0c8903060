package header

import (
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestAppend(t *testing.T) {
	cases := map[string]struct {
		v    Values
		mode Mode
		want [][2]string
	}{
		"allowed, all": {
			Values{Policy: "per_minute", Limit: 100, Window: time.Minute, Remaining: 42, Reset: 1500 * time.Millisecond},
			All,
			[][2]string{
				{"RateLimit-Policy", `"per_minute";q=100;w=60`},
				{"RateLimit", `"per_minute";r=42;t=2`},
				{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "42"}, {"X-RateLimit-Reset", "2"},
			},
		},
		"denied, off: Retry-After alone, at least 1s": {
			Values{Policy: "x", Limit: 1, Denied: true, RetryAfter: 10 * time.Millisecond},
			Off,
			[][2]string{{"Retry-After", "1"}},
		},
		"denied, ietf: Retry-After rounded up": {
			Values{Policy: "x", Limit: 1, Window: time.Second, Reset: time.Second, Denied: true, RetryAfter: 2001 * time.Millisecond},
			IETF,
			[][2]string{{"RateLimit-Policy", `"x";q=1;w=1`}, {"RateLimit", `"x";r=0;t=1`}, {"Retry-After", "3"}},
		},
		"denied for good: no Retry-After": {
			Values{Policy: "x", Limit: 1, Denied: true, RetryAfter: math.MaxInt64},
			XRateLimit,
			[][2]string{{"X-RateLimit-Limit", "1"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "0"}},
		},
		"hostile name": {
			Values{Policy: "a\"b\\c\nd\xff", Limit: 1, Window: time.Second},
			IETF,
			[][2]string{{"RateLimit-Policy", `"a\"b\\c_d_";q=1;w=1`}, {"RateLimit", `"a\"b\\c_d_";r=0;t=0`}},
		},
		"quota unit and partition key": {
			Values{Policy: "peruser", Limit: 65535, Window: 10 * time.Second, Remaining: 300, Reset: time.Minute,
				QuotaUnit: "content-bytes", PartitionKey: []byte("App-999")},
			IETF,
			[][2]string{
				{"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:QXBwLTk5OQ==:`},
				{"RateLimit", `"peruser";r=300;t=60;pk=:QXBwLTk5OQ==:`},
			},
		},
		"concurrent requests": {
			Values{Policy: "inflight", Limit: 8, QuotaUnit: "concurrent-requests", Remaining: 3},
			IETF,
			[][2]string{{"RateLimit-Policy", `"inflight";q=8;qu="concurrent-requests"`}, {"RateLimit", `"inflight";r=3;t=0`}},
		},
		"requests, the default unit, is not written": {
			Values{Policy: "p", Limit: 5, Window: time.Hour, QuotaUnit: "requests"},
			IETF,
			[][2]string{{"RateLimit-Policy", `"p";q=5;w=3600`}, {"RateLimit", `"p";r=0;t=0`}},
		},
		"no window, no w; no name, default": {
			Values{Limit: 5, Remaining: 5},
			IETF,
			[][2]string{{"RateLimit-Policy", `"default";q=5`}, {"RateLimit", `"default";r=5;t=0`}},
		},
		"integers clamped to 15 digits and to 0": {
			Values{Policy: "big", Limit: 1 << 62, Window: math.MaxInt64, Remaining: -3, Reset: math.MaxInt64},
			IETF,
			[][2]string{{"RateLimit-Policy", `"big";q=999999999999999;w=9223372037`}, {"RateLimit", `"big";r=0;t=9223372037`}},
		},
		"an empty partition key is not written": {
			Values{Policy: "p", Limit: 1, PartitionKey: []byte{}},
			IETF,
			[][2]string{{"RateLimit-Policy", `"p";q=1`}, {"RateLimit", `"p";r=0;t=0`}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fields := c.v.Append(nil, c.mode)
			got := make([][2]string, len(fields))
			for i, f := range fields {
				got[i] = [2]string{f.Name, f.Value}
				constant := f.Name == "RateLimit-Policy" && len(c.v.PartitionKey) == 0 || f.Name == "X-RateLimit-Limit"
				if f.Constant != constant {
					t.Errorf("%s: Constant is %v, want %v", f.Name, f.Constant, constant)
				}
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestAppendHostileNames writes names that could break a field and
// parses the fields back: each gives one policy and one item, named as
// written.
func TestAppendHostileNames(t *testing.T) {
	cases := map[string]struct{ name, want string }{
		"quotes and backslashes": {`a"b\c\"`, `a"b\c\"`},
		"a field's own syntax":   {`x";q=9, "y";q=1;pk=:AA==:`, `x";q=9, "y";q=1;pk=:AA==:`},
		"control bytes":          {"a\r\nRateLimit: \"b\";r=999\x00\x7f", "a__RateLimit: \"b\";r=999__"},
		"non-ASCII":              {"débit 😀", "d__bit ____"},
		"invalid UTF-8":          {"\xff\xfe", "__"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			v := Values{Policy: c.name, Limit: 10, Window: time.Minute, Remaining: 7, Reset: time.Second, PartitionKey: []byte{0, 1}}
			fields := v.Append(nil, IETF)
			ps := ParsePolicies([]string{fields[0].Value})
			if len(ps) != 1 || ps[0].Name != c.want || ps[0].Quota != 10 {
				t.Errorf("RateLimit-Policy %s: got %+v, want one policy %q with q=10", fields[0].Value, ps, c.want)
			}
			items := ParseRateLimit([]string{fields[1].Value})
			if len(items) != 1 || items[0].Name != c.want || items[0].Remaining != 7 {
				t.Errorf("RateLimit %s: got %+v, want one item %q with r=7", fields[1].Value, items, c.want)
			}
		})
	}
}

// TestPolicyCache checks that the cached policy fields are keyed on all
// they hold: limits differing in one of name, quota, window or unit get
// fields of their own.
func TestPolicyCache(t *testing.T) {
	base := Values{Policy: "cache", Limit: 10, Window: time.Second}
	variants := []Values{base, base, base, base, base}
	variants[1].Policy = "cache2"
	variants[2].Limit = 11
	variants[3].Window = 2 * time.Second
	variants[4].QuotaUnit = "content-bytes"
	first := make([]string, len(variants))
	for round := range 2 { // the second round reads the cache
		for i, v := range variants {
			got := v.Append(nil, IETF)[0].Value
			if round == 0 {
				first[i] = got
			} else if got != first[i] {
				t.Errorf("variant %d: got %s from the cache, want %s", i, got, first[i])
			}
		}
	}
	seen := map[string]bool{}
	for _, f := range first {
		seen[f] = true
	}
	if len(seen) != len(variants) {
		t.Errorf("got %d distinct fields for %d distinct limits: %q", len(seen), len(variants), first)
	}
}

func TestSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {1, 1}, {time.Second, 1}, {time.Second + 1, 2}, {90 * time.Second, 90},
		{math.MaxInt64, 9223372037},
	} {
		if got := Seconds(tt.d); got != tt.want {
			t.Errorf("Seconds(%d): got %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"all": All, "ietf": IETF, "x-ratelimit": XRateLimit, "off": Off} {
		if got, ok := ParseMode(s); !ok || got != want {
			t.Errorf("ParseMode(%q): got %v %v, want %v", s, got, ok, want)
		}
	}
	if _, ok := ParseMode("some"); ok {
		t.Errorf("ParseMode(some): want not ok")
	}
}

// Set writes what Append lists, under the names http.Header.Get finds.
func TestSet(t *testing.T) {
	v := Values{Policy: "p", Limit: 100, Window: time.Minute, Remaining: 7, Reset: 3 * time.Second, Denied: true, RetryAfter: 2 * time.Second}
	for _, mode := range []Mode{All, IETF, XRateLimit, Off} {
		h := http.Header{"Ratelimit": {"stale"}, "Other": {"kept"}}
		v.Set(h, mode)
		fs := v.Append(nil, mode)
		for _, f := range fs {
			if got := h.Values(f.Name); len(got) != 1 || got[0] != f.Value {
				t.Errorf("mode %d: %s = %q, want [%q]", mode, f.Name, got, f.Value)
			}
		}
		if mode&IETF == 0 && h.Get("RateLimit") != "stale" {
			t.Errorf("mode %d: RateLimit = %q, want the handler's own left alone", mode, h.Get("RateLimit"))
		}
		if h.Get("Other") != "kept" || len(h) != len(fs)+1+map[bool]int{true: 0, false: 1}[mode&IETF != 0] {
			t.Errorf("mode %d: header %v, want %d fields and Other", mode, h, len(fs))
		}
	}
}

// A prepared Values writes what an unprepared one does, also when a copy
// changes what was prepared.
func TestPrepare(t *testing.T) {
	base := Values{Policy: "p", Limit: 10, Window: time.Minute, Remaining: 3, Reset: time.Second}
	prepared := base.Prepare()
	changed := prepared
	changed.Policy, changed.Limit, changed.QuotaUnit = "other", 20, "concurrent-requests"
	keyed := prepared
	keyed.PartitionKey = []byte("tenant")
	for name, c := range map[string]struct{ got, want Values }{
		"as prepared":    {prepared, base},
		"fields changed": {changed, Values{Policy: "other", Limit: 20, Window: time.Minute, Remaining: 3, Reset: time.Second, QuotaUnit: "concurrent-requests"}},
		"partition key":  {keyed, Values{Policy: "p", Limit: 10, Window: time.Minute, Remaining: 3, Reset: time.Second, PartitionKey: []byte("tenant")}},
	} {
		got, want := http.Header{}, http.Header{}
		c.got.Set(got, All)
		c.want.Set(want, All)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
