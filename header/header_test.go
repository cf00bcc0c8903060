package header

import (
	"math"
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
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fields := c.v.Append(nil, c.mode)
			got := make([][2]string, len(fields))
			for i, f := range fields {
				got[i] = [2]string{f.Name, f.Value}
				constant := f.Name == "RateLimit-Policy" || f.Name == "X-RateLimit-Limit"
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
