package storetest

import "github.com/bouncerhq/bouncer"

// debtScenarios charge past the limits (store.Charger): each
// algorithm's debt as docs/algorithms.md defines it, paid back by time
// or lowered by a refund.
func debtScenarios() []Scenario {
	var all []Scenario
	for _, a := range []bouncer.Algorithm{bouncer.TokenBucket, bouncer.GCRA, bouncer.LeakyBucket} {
		all = append(all, bucketDebtScenarios(a)...)
	}
	window := bouncer.Limit{Name: "window", Algorithm: bouncer.FixedWindow, Rate: 3, Period: s}
	windowCharged := bouncer.Limit{Name: "charged", Algorithm: bouncer.FixedWindow, Rate: 10, Period: s, ChargeDenied: true}
	log := bouncer.Limit{Name: "log", Algorithm: bouncer.SlidingWindowLog, Rate: 3, Period: s}
	counter := bouncer.Limit{Name: "counter4", Algorithm: bouncer.SlidingWindowCounter, Rate: 4, Period: s}
	return append(all,
		// A window counts past its rate up to a full window: it denies
		// until its end, which forgives the rest.
		Scenario{Name: "fixed_window/debt", Limit: window, Steps: []Step{
			allow(100*ms, 2, 1, 900*ms),
			charge(200*ms, 5),
			deny(200*ms, 1, 0, 800*ms, 800*ms),
			allow(200*ms, 0, 0, 800*ms), // full, as at the rate: a peek passes
			allow(1*s, 1, 2, 1*s),
			charge(1500*ms, 10),
			refund(1500*ms, 1), // from the full window
			allow(1500*ms, 1, 0, 500*ms),
		}},
		Scenario{Name: "fixed_window/debt_charge_denied", Limit: windowCharged, Steps: []Step{
			allow(0, 8, 2, 1*s),
			charge(0, 5), // 13 saturates at 11, over
			deny(0, 0, 0, 1*s, 1*s),
			deny(500*ms, 1, 0, 500*ms, 500*ms),
			allow(1*s, 0, 10, 0),
		}},
		// A log keeps the charged units until they leave the window.
		Scenario{Name: "sliding_window_log/debt", Limit: log, Steps: []Step{
			allow(0, 1, 2, 1*s),
			charge(400*ms, 4), // 5 in the window
			deny(400*ms, 1, 0, 1*s, 1*s),
			deny(400*ms, 0, 0, 1*s, 1*s), // in debt, a peek is denied too
			deny(999*ms, 1, 0, 401*ms, 401*ms),
			deny(1*s, 1, 0, 400*ms, 400*ms), // the unit of 0 left: 4
			refund(1*s, 2),
			allow(1*s, 1, 0, 1*s),
			allow(1400*ms, 0, 2, 600*ms),
		}},
		// Past Rate+1 entries a charge joins the newest entry, moved to
		// now: its units leave later, never earlier.
		Scenario{Name: "sliding_window_log/debt_entries_bounded", Limit: log, Steps: []Step{
			charge(0, 1),
			charge(1*ms, 1),
			charge(2*ms, 1),
			charge(3*ms, 1),
			charge(4*ms, 1), // joins the entry of 3ms, now at 4ms
			deny(1001*ms, 1, 0, 3*ms, 1*ms),
			allow(1003*ms, 0, 1, 1*ms),
			allow(1004*ms, 0, 3, 0),
		}},
		// The current window's count rises to a full window, which weighs
		// in the next one as any count.
		Scenario{Name: "sliding_window_counter/debt", Limit: counter, Steps: []Step{
			allow(0, 2, 2, 2*s),
			charge(0, 6), // 8 saturates at 4
			deny(0, 1, 0, 2*s, 1250*ms),
			allow(0, 0, 0, 2*s),
			allow(1250*ms, 1, 0, 1750*ms),
			charge(1250*ms, 2),
			refund(1250*ms, 2),
			allow(1250*ms, 0, 0, 1750*ms),
			allow(3*s, 0, 4, 0),
		}},
	)
}

// bucketDebtScenarios: 10/s, burst 5, one token per 100ms. A debt moves
// the bucket's instant past its capacity; time pays it back.
func bucketDebtScenarios(a bouncer.Algorithm) []Scenario {
	l := bouncer.Limit{Name: "bucket", Algorithm: a, Rate: 10, Period: s, Burst: 5}
	return []Scenario{
		{Name: a.String() + "/debt", Limit: l, Steps: []Step{
			allow(0, 2, 3, 200*ms),
			charge(0, 7), // 4 tokens of debt: full again at 900ms
			deny(0, 1, 0, 900*ms, 500*ms),
			deny(0, 0, 0, 900*ms, 400*ms), // in debt, a peek is denied too
			deny(400*ms, 1, 0, 500*ms, 100*ms),
			allow(500*ms, 1, 0, 500*ms),
			allow(1*s, 0, 5, 0),
		}},
		{Name: a.String() + "/debt_refund", Limit: l, Steps: []Step{
			allow(0, 5, 0, 500*ms),
			charge(0, 5),
			refund(0, 3), // lowers the debt
			deny(0, 1, 0, 700*ms, 300*ms),
			refund(0, 10), // more than the debt and the burst: full
			allow(0, 0, 5, 0),
			charge(0, 1),
			allow(0, 4, 0, 500*ms),
		}},
	}
}
