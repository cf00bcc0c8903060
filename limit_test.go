package bouncer_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/calendar"
)

func TestLimitValidate(t *testing.T) {
	tb := bouncer.Limit{Name: "l", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 5}
	fw := bouncer.Limit{Name: "l", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Second}
	with := func(l bouncer.Limit, f func(*bouncer.Limit)) bouncer.Limit { f(&l); return l }
	cases := []struct {
		name  string
		limit bouncer.Limit
		field string // "" when valid
	}{
		{"token_bucket", tb, ""},
		{"fixed_window", fw, ""},
		{"one_per_nanosecond", with(tb, func(l *bouncer.Limit) { l.Period = 10 }), ""},
		{"window_one_per_nanosecond", with(fw, func(l *bouncer.Limit) { l.Period = 10 }), "rate"},
		{"counter_one_per_nanosecond", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Period = bouncer.SlidingWindowCounter, 10 }), "rate"},
		{"log_one_per_nanosecond", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Period = bouncer.SlidingWindowLog, 10 }), ""},
		{"shaping_leaky_bucket", with(tb, func(l *bouncer.Limit) { l.Algorithm, l.Shape = bouncer.LeakyBucket, true }), ""},
		{"largest", with(fw, func(l *bouncer.Limit) { l.Rate, l.Period = bouncer.MaxRate, bouncer.MaxPeriod }), ""},
		{"zero_algorithm", with(tb, func(l *bouncer.Limit) { l.Algorithm = 0 }), "algorithm"},
		{"unknown_algorithm", with(tb, func(l *bouncer.Limit) { l.Algorithm = bouncer.Concurrency + 1 }), "algorithm"},
		{"zero_rate", with(tb, func(l *bouncer.Limit) { l.Rate = 0 }), "rate"},
		{"negative_rate", with(fw, func(l *bouncer.Limit) { l.Rate = -1 }), "rate"},
		{"rate_above_max", with(fw, func(l *bouncer.Limit) { l.Rate, l.Period = bouncer.MaxRate+1, bouncer.MaxPeriod }), "rate"},
		{"more_than_one_per_nanosecond", with(fw, func(l *bouncer.Limit) { l.Period = 9 }), "rate"},
		{"zero_period", with(tb, func(l *bouncer.Limit) { l.Period = 0 }), "period"},
		{"negative_period", with(fw, func(l *bouncer.Limit) { l.Period = -time.Second }), "period"},
		{"period_above_max", with(fw, func(l *bouncer.Limit) { l.Period = bouncer.MaxPeriod + 1 }), "period"},
		{"zero_burst", with(tb, func(l *bouncer.Limit) { l.Burst = 0 }), "burst"},
		{"negative_burst", with(tb, func(l *bouncer.Limit) { l.Algorithm, l.Burst = bouncer.GCRA, -1 }), "burst"},
		{"burst_above_max", with(tb, func(l *bouncer.Limit) { l.Rate, l.Period, l.Burst = 1, 1, bouncer.MaxRate+1 }), "burst"},
		{"burst_on_fixed_window", with(fw, func(l *bouncer.Limit) { l.Burst = 5 }), "burst"},
		{"burst_on_concurrency", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Burst = bouncer.Concurrency, 1 }), "burst"},
		{"shape_on_token_bucket", with(tb, func(l *bouncer.Limit) { l.Shape = true }), "shape"},
		{"shape_on_sliding_window_log", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Shape = bouncer.SlidingWindowLog, true }), "shape"},
		{"charge_denied_fixed_window", with(fw, func(l *bouncer.Limit) { l.ChargeDenied = true }), ""},
		{"charge_denied_sliding_window_counter", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.ChargeDenied = bouncer.SlidingWindowCounter, true }), ""},
		// Counts of up to Rate+1 need Period ≥ Rate+2 ns to pack.
		{"charge_denied_rate_plus_two", with(fw, func(l *bouncer.Limit) { l.Period, l.ChargeDenied = 12, true }), ""},
		{"charge_denied_rate_plus_one", with(fw, func(l *bouncer.Limit) { l.Period, l.ChargeDenied = 11, true }), "charge_denied"},
		{"charge_denied_counter_rate_plus_one", with(fw, func(l *bouncer.Limit) {
			l.Algorithm, l.Period, l.ChargeDenied = bouncer.SlidingWindowCounter, 11, true
		}), "charge_denied"},
		{"charge_denied_largest", with(fw, func(l *bouncer.Limit) { l.Rate, l.Period, l.ChargeDenied = bouncer.MaxRate, bouncer.MaxPeriod, true }), ""},
		{"charge_denied_on_token_bucket", with(tb, func(l *bouncer.Limit) { l.ChargeDenied = true }), "charge_denied"},
		{"charge_denied_on_gcra", with(tb, func(l *bouncer.Limit) { l.Algorithm, l.ChargeDenied = bouncer.GCRA, true }), "charge_denied"},
		{"charge_denied_on_leaky_bucket", with(tb, func(l *bouncer.Limit) { l.Algorithm, l.ChargeDenied = bouncer.LeakyBucket, true }), "charge_denied"},
		{"charge_denied_on_sliding_window_log", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.ChargeDenied = bouncer.SlidingWindowLog, true }), "charge_denied"},
		{"charge_denied_on_concurrency", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.ChargeDenied = bouncer.Concurrency, true }), "charge_denied"},
		{"lease_token_bucket", with(tb, func(l *bouncer.Limit) { l.Mode = bouncer.Lease }), ""},
		{"async_fixed_window", with(fw, func(l *bouncer.Limit) { l.Mode = bouncer.Async }), ""},
		{"unknown_mode", with(fw, func(l *bouncer.Limit) { l.Mode = bouncer.Async + 1 }), "mode"},
		{"lease_sliding_window_log", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Mode = bouncer.SlidingWindowLog, bouncer.Lease }), "mode"},
		{"lease_sliding_window_counter", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Mode = bouncer.SlidingWindowCounter, bouncer.Lease }), "mode"},
		{"async_sliding_window_log", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Mode = bouncer.SlidingWindowLog, bouncer.Async }), ""},
		{"lease_shaping", with(tb, func(l *bouncer.Limit) { l.Algorithm, l.Shape, l.Mode = bouncer.LeakyBucket, true, bouncer.Lease }), "mode"},
		{"lease_concurrency", with(fw, func(l *bouncer.Limit) { l.Algorithm, l.Mode = bouncer.Concurrency, bouncer.Lease }), "mode"},
		// 1 per hour with a burst of 10⁶ takes over a century to refill.
		{"refill_overflow", with(tb, func(l *bouncer.Limit) { l.Rate, l.Period, l.Burst = 1, time.Hour, 1_000_000 }), "burst"},
		{"refill_overflow_64_bits", with(tb, func(l *bouncer.Limit) { l.Rate, l.Period, l.Burst = 1, bouncer.MaxPeriod, bouncer.MaxRate }), "burst"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.limit.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate(%v): got %v, want nil", c.limit, err)
				}
				if _, err := bouncer.NewLimit(c.limit); err != nil {
					t.Fatalf("NewLimit(%v): got %v, want nil", c.limit, err)
				}
				return
			}
			if !errors.Is(err, bouncer.ErrInvalidLimit) {
				t.Fatalf("Validate(%v): got %v, want an error wrapping ErrInvalidLimit", c.limit, err)
			}
			var le *bouncer.LimitError
			if !errors.As(err, &le) || le.Field != c.field || le.Name != c.limit.Name {
				t.Fatalf("Validate(%v): got %#v, want a *LimitError for field %q of limit %q", c.limit, err, c.field, c.limit.Name)
			}
			if l, err := bouncer.NewLimit(c.limit); err == nil || l != (bouncer.Limit{}) {
				t.Fatalf("NewLimit(%v): got (%v, %v), want the zero Limit and an error", c.limit, l, err)
			}
		})
	}
}

// TestLimitValidateNeverPanics feeds Validate extreme values of every
// numeric field.
func TestLimitValidateNeverPanics(t *testing.T) {
	ints := []int64{math.MinInt64, -1, 0, 1, 2, bouncer.MaxRate, bouncer.MaxRate + 1, int64(bouncer.MaxPeriod), math.MaxInt64}
	for a := range bouncer.Concurrency + 2 {
		for _, rate := range ints {
			for _, period := range ints {
				for _, burst := range ints {
					for _, charge := range []bool{false, true} {
						l := bouncer.Limit{Algorithm: a, Rate: rate, Period: time.Duration(period), Burst: burst, ChargeDenied: charge}
						_ = l.Validate()
						_ = l.String()
					}
				}
			}
		}
	}
}

func TestLimitCapacity(t *testing.T) {
	for _, a := range bouncer.Algorithms() {
		l := bouncer.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 3}
		want := int64(10)
		if a.UsesBurst() {
			want = 3
		}
		if got := l.Capacity(); got != want {
			t.Errorf("%v: Capacity: got %d, want %d", a, got, want)
		}
	}
}

func TestAlgorithmRoundTrip(t *testing.T) {
	for _, a := range bouncer.Algorithms() {
		name := a.String()
		got, err := bouncer.ParseAlgorithm(name)
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q): got (%v, %v), want (%v, nil)", name, got, err, a)
		}
		text, err := a.MarshalText()
		if err != nil || string(text) != name {
			t.Errorf("%v.MarshalText: got (%q, %v), want (%q, nil)", a, text, err, name)
		}
		var u bouncer.Algorithm
		if err := u.UnmarshalText(text); err != nil || u != a {
			t.Errorf("UnmarshalText(%q): got (%v, %v), want (%v, nil)", text, u, err, a)
		}
	}
	for _, name := range []string{"", "TOKEN_BUCKET", "token-bucket", "leaky"} {
		if a, err := bouncer.ParseAlgorithm(name); err == nil {
			t.Errorf("ParseAlgorithm(%q): got %v, want an error", name, a)
		}
	}
	for _, a := range []bouncer.Algorithm{0, bouncer.Concurrency + 1, 255} {
		if a.Valid() {
			t.Errorf("%d.Valid(): got true, want false", uint8(a))
		}
		if _, err := a.MarshalText(); err == nil {
			t.Errorf("%d.MarshalText: got nil error, want one", uint8(a))
		}
		if got, want := a.String(), "algorithm("; len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("%d.String(): got %q, want %q…", uint8(a), got, want)
		}
	}
}

func TestLimitString(t *testing.T) {
	cases := []struct {
		limit bouncer.Limit
		want  string
	}{
		{bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 20}, "token_bucket 10/1s burst 20"},
		{bouncer.Limit{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 1000, Period: 24 * time.Hour}, "day: fixed_window 1000/24h0m0s"},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute, ChargeDenied: true}, "fixed_window 10/1m0s charge_denied"},
		{bouncer.Limit{Algorithm: bouncer.GCRA, Rate: 10, Period: time.Second, Burst: 1, Mode: bouncer.Lease}, "gcra 10/1s burst 1 mode lease"},
	}
	for _, c := range cases {
		if got := c.limit.String(); got != c.want {
			t.Errorf("String of %#v: got %q, want %q", c.limit, got, c.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []bouncer.Mode{bouncer.Strict, bouncer.Lease, bouncer.Async} {
		got, err := bouncer.ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q): got (%v, %v), want %v", m.String(), got, err, m)
		}
	}
	if got, err := bouncer.ParseMode(""); err != nil || got != bouncer.Strict {
		t.Errorf("ParseMode(\"\"): got (%v, %v), want strict", got, err)
	}
	if _, err := bouncer.ParseMode("eventual"); err == nil {
		t.Error("ParseMode(\"eventual\"): got nil, want an error")
	}
	if s := bouncer.Mode(9).String(); s != "Mode(9)" {
		t.Errorf("Mode(9).String() = %q", s)
	}
}

func TestStoreErrorPolicyFor(t *testing.T) {
	for _, tc := range []struct {
		store, limit, want bouncer.StoreErrorPolicy
	}{
		{bouncer.StoreErrorDefault, bouncer.StoreErrorDefault, bouncer.StoreErrorLocal},
		{bouncer.StoreErrorAllow, bouncer.StoreErrorDefault, bouncer.StoreErrorAllow},
		{bouncer.StoreErrorAllow, bouncer.StoreErrorDeny, bouncer.StoreErrorDeny},
		{bouncer.StoreErrorDefault, bouncer.StoreErrorAllow, bouncer.StoreErrorAllow},
	} {
		if got := tc.store.For(bouncer.Limit{OnStoreError: tc.limit}); got != tc.want {
			t.Errorf("store %q, limit %q: got %q, want %q", tc.store, tc.limit, got, tc.want)
		}
	}
}

// A calendar limit is a fixed window whose Period is its calendar's
// longest window; NewLimit fills it in, Validate names what is wrong.
func TestCalendarLimit(t *testing.T) {
	month := calendar.Period{Unit: calendar.Month, Zone: "America/New_York", Anchor: 15}
	l, err := bouncer.NewLimit(bouncer.Limit{Name: "budget", Algorithm: bouncer.FixedWindow, Rate: 50, Calendar: month})
	if err != nil {
		t.Fatal(err)
	}
	if l.Period != month.Longest() || l.Period != 31*24*time.Hour+2*time.Hour {
		t.Errorf("Period = %v, want the longest month, %v", l.Period, month.Longest())
	}
	if got, want := l.String(), "budget: fixed_window 50/calendar_month America/New_York anchor 15"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		l     bouncer.Limit
		field string
	}{
		{bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 5, Burst: 5, Period: month.Longest(), Calendar: month}, "calendar"},
		{bouncer.Limit{Algorithm: bouncer.SlidingWindowCounter, Rate: 5, Period: month.Longest(), Calendar: month}, "calendar"},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Period: time.Hour, Calendar: month}, "period"},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Calendar: month}, "period"},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Period: month.Longest(), Calendar: calendar.Period{Unit: calendar.Month, Zone: "Nowhere/Atlantis"}}, "calendar"},
		{bouncer.Limit{Algorithm: bouncer.FixedWindow, Rate: 5, Period: month.Longest(), Calendar: calendar.Period{Unit: calendar.Month, Anchor: 32}}, "calendar"},
	} {
		var le *bouncer.LimitError
		if err := c.l.Validate(); !errors.As(err, &le) || le.Field != c.field {
			t.Errorf("%+v: Validate() = %v, want an error on %s", c.l, err, c.field)
		}
	}
}
