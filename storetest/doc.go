// Package storetest is the conformance suite that every Bouncer store
// passes: one definition of how a bouncer.Limiter behaves, whatever keeps
// its state.
//
// A store's tests call Run with a Factory that makes an empty store over a
// fake Clock:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bouncer.Limiter {
//			return memstore.New(memstore.Options{Now: clock.Now})
//		})
//	}
//
// Run checks the step tables of Scenarios, the all-or-nothing rule across
// limits and keys (with the limits that ChargeDenied charges when a check
// is denied), which limit a decision reports, peeks (explicit, with
// Request.Peek), costs above capacity, refunds, key isolation, expiry,
// invalid input, resets (for a store.Resetter), reserve-then-settle
// (for a store.Charger: debts, their repayment over time, settles after
// refunds, denied reservations, limits that refuse a charge), many
// goroutines on one key, and random sequences compared with a naive
// reference Model. A store that is not a Charger skips the settle steps,
// saying so.
//
// A store that implements store.Sharer also runs Shares, with a
// SharerFactory: the exchange of async instances' shares (others
// returned, one's own never, a share recorded again replaces the last,
// expiry on the store's clock, pairs apart, the bounds, invalid input).
//
// The same tables and models drive the tests of package algo, so that the
// algorithms, every store and the fuzz targets share one definition of
// behaviour.
package storetest
