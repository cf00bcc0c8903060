// Package bouncer is the vocabulary of the Bouncer rate limiter for its
// users: limits, algorithms, requests, decisions, the Limiter interface
// that every store implements, and CheckEach, Settle and Reset over any
// Limiter.
//
// A check asks whether Cost units may pass for one or more keys, each under
// its own limits. It is all or nothing: the check is allowed only if every
// limit of every key allows, and a denied check charges nothing (except
// the limits that opt into Limit.ChargeDenied, which count denied requests
// too). Being denied is not an error; an error means the store failed.
//
// The algorithms live in package algo, the in-process store in memstore,
// what a store author implements and calls beyond Limiter in package store,
// and the conformance suite every store passes in storetest. This package
// imports only the standard library.
package bouncer
