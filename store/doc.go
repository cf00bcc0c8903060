// Package store is what a store author implements and calls beyond the
// bouncer.Limiter interface: the optional capabilities a store offers
// (Charger, EachLimiter, Resetter), which the root package's Settle,
// CheckEach and Reset find by type assertion, and the checks and
// arithmetic every store shares (Validate, ValidateCharge, Chargeable,
// Interval).
//
// A user of the library does not need it: bouncer.Settle, bouncer.CheckEach
// and bouncer.Reset take any bouncer.Limiter. A store declares what it
// implements where it is defined:
//
//	var _ store.Charger = (*Store)(nil)
//
// and proves it with the conformance suite in package storetest. This
// package imports only the root package and the standard library.
package store
