package header

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParse parses arbitrary RateLimit-Policy, RateLimit and Retry-After
// values (a newline in the first two splits field lines): no input
// panics, and whatever is read, written again (Policy.String,
// Item.String, delay-seconds), reads back the same.
func FuzzParse(f *testing.F) {
	f.Add(`"burst";q=100;w=60,"daily";q=1000;w=86400`, `"default";r=50;t=30`, "120")
	f.Add(`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("\"sliding\";q=100;w=60;burst=1000\n\"fixed\";q=5000;w=3600;burst=0", `"sliding";q=12;r=6;t=1`, "Wednesday, 21-Oct-15 07:28:00 GMT")
	f.Add(`tok;q=1;qu=content-bytes;a=1.5;b;c=?0;d=@1;e=%"%c3%bc", ("x" y);q=2`, `"a";t=5, "b";r=0;t=999999999999999`, "99999999999999999999")
	f.Add(`"a";q=1000000000000000`, `"a";r=-1`, "-1")
	f.Add(`"a\"b\\c";q=0;pk=::`, `"a";r=1;t=1;`, "")
	now := time.Date(2026, 5, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, policies, ratelimit, retryAfter string) {
		ps := ParsePolicies(strings.Split(policies, "\n"))
		written := make([]string, len(ps))
		for i, p := range ps {
			written[i] = p.String()
		}
		if again := ParsePolicies([]string{strings.Join(written, ", ")}); !reflect.DeepEqual(again, ps) {
			t.Fatalf("policies %q: read %+v, wrote %q, read back %+v", policies, ps, written, again)
		}

		items := ParseRateLimit(strings.Split(ratelimit, "\n"))
		written = make([]string, len(items))
		for i, it := range items {
			written[i] = it.String()
		}
		if again := ParseRateLimit(written); !reflect.DeepEqual(again, items) {
			t.Fatalf("items %q: read %+v, wrote %q, read back %+v", ratelimit, items, written, again)
		}

		if d, ok := ParseRetryAfter(retryAfter, now); ok {
			if d < 0 {
				t.Fatalf("Retry-After %q: got %v, want a delay of 0 or more", retryAfter, d)
			}
			s := itoa(Seconds(d))
			if again, ok := ParseRetryAfter(s, now); !ok || again != seconds(Seconds(d)) || again < d {
				t.Fatalf("Retry-After %q: read %v, wrote %s, read back %v %v", retryAfter, d, s, again, ok)
			}
		}

		ParseLegacy(http.Header{"X-Ratelimit-Remaining": {retryAfter}, "X-Ratelimit-Reset": {ratelimit}, "Date": {policies}})
	})
}
