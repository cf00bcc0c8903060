package header

import (
	"bytes"
	"math"
	"net/http"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// sanitized is s as a written name reads back: bytes outside printable
// ASCII become '_'.
func sanitized(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '_'
		}
	}
	return string(b)
}

// duration draws durations users have and the extremes.
func duration() *rapid.Generator[time.Duration] {
	return rapid.OneOf(
		rapid.Map(rapid.Int64Range(0, int64(48*time.Hour)), func(n int64) time.Duration { return time.Duration(n) }),
		rapid.Map(rapid.Int64(), func(n int64) time.Duration { return time.Duration(n) }),
		rapid.SampledFrom([]time.Duration{0, 1, time.Second, math.MaxInt64}),
	)
}

func count() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(0, 1e6), rapid.Int64Range(0, math.MaxInt64), rapid.SampledFrom([]int64{0, maxInteger, maxInteger + 1}))
}

// TestRoundTrip writes the headers of any Values and parses them back:
// the numbers read are the numbers written, in whole seconds rounded up
// and clamped to what a field can carry.
func TestRoundTrip(t *testing.T) {
	now := time.Date(2026, 5, 23, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		v := Values{
			Policy:       rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z_0-9]{1,20}`)).Draw(t, "policy"),
			Limit:        count().Draw(t, "limit"),
			Window:       duration().Draw(t, "window"),
			Remaining:    count().Draw(t, "remaining"),
			Reset:        duration().Draw(t, "reset"),
			Denied:       rapid.Bool().Draw(t, "denied"),
			RetryAfter:   duration().Draw(t, "retry after"),
			QuotaUnit:    rapid.OneOf(rapid.SampledFrom([]string{"", "requests", "content-bytes", "concurrent-requests"}), rapid.String()).Draw(t, "unit"),
			PartitionKey: rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "key"),
		}
		h := http.Header{}
		for _, f := range v.Append(nil, All) {
			h.Set(f.Name, f.Value)
		}

		name := sanitized(v.policyName())
		unit := sanitized(v.QuotaUnit)
		if unit == "" {
			unit = DefaultQuotaUnit
		}
		window := seconds(Seconds(v.Window))
		ps := ParsePolicies(h.Values("RateLimit-Policy"))
		if len(ps) != 1 {
			t.Fatalf("RateLimit-Policy %q: got %d policies, want 1", h.Values("RateLimit-Policy"), len(ps))
		}
		p := ps[0]
		if p.Name != name || p.Quota != min(v.Limit, maxInteger) || p.Window != window || p.QuotaUnit != unit || !bytes.Equal(p.PartitionKey, v.PartitionKey) {
			t.Fatalf("RateLimit-Policy %q: got %+v, want %q q=%d w=%v qu=%q pk=%x", h.Get("RateLimit-Policy"), p, name, min(v.Limit, maxInteger), window, unit, v.PartitionKey)
		}

		reset := seconds(Seconds(v.Reset))
		items := ParseRateLimit(h.Values("RateLimit"))
		if len(items) != 1 {
			t.Fatalf("RateLimit %q: got %d items, want 1", h.Get("RateLimit"), len(items))
		}
		it := items[0]
		if it.Name != name || !it.HasRemaining || it.Remaining != min(v.Remaining, maxInteger) || !it.HasReset || it.Reset != reset || !bytes.Equal(it.PartitionKey, v.PartitionKey) {
			t.Fatalf("RateLimit %q: got %+v, want %q r=%d t=%v pk=%x", h.Get("RateLimit"), it, name, min(v.Remaining, maxInteger), reset, v.PartitionKey)
		}

		legacy, ok := ParseLegacy(h)
		wantLegacy := Legacy{v.Limit, v.Remaining, reset}
		if Seconds(v.Reset) > 1e9 {
			wantLegacy.Reset = 0 // read as a Unix time, and the answer has no Date
		}
		if !ok || legacy != wantLegacy {
			t.Fatalf("X-RateLimit-*: got %+v %v, want %+v", legacy, ok, wantLegacy)
		}

		retry, ok := ParseRetryAfter(h.Get("Retry-After"), now)
		if written := v.Denied && v.RetryAfter != math.MaxInt64; ok != written {
			t.Fatalf("Retry-After %q: got ok %v, want %v", h.Get("Retry-After"), ok, written)
		}
		if want := seconds(max(Seconds(v.RetryAfter), 1)); ok && retry != want {
			t.Fatalf("Retry-After %q: got %v, want %v", h.Get("Retry-After"), retry, want)
		}
	})
}
