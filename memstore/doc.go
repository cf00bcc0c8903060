// Package memstore is Bouncer's in-process store: every algorithm of
// package algo over sharded tables, safe for concurrent use, with no
// allocation per check on an existing key.
//
// Keys are not kept: a store remembers each key by a 64-bit hash, seeded
// at random per store, and keeps per limit one table from that hash to the
// limit's state. A one-word algorithm (token bucket, GCRA, leaky bucket,
// fixed window) costs one 16-byte slot of an open-addressing table per key;
// the sliding window counter two words in a map; the log algorithms their
// entries. Two different keys share state only if their 64-bit hashes
// collide, which at ten million keys happens with probability about
// 3 × 10⁻⁶, and the random seed keeps clients from aiming for it.
//
// A check of one key under one one-word limit takes no lock: it
// compare-and-swaps the key's slot (words.go states the protocol). Other
// checks lock the shards of their keys in order, so every check is one
// atomic step. State that equals a fresh key's again (a bucket refilled,
// a window over) decides as a fresh key's does, and stays in place while
// its key is still checked, so that a client below its limit keeps the
// lock-free check; a table that needs room forgets the states whose keys
// have not been charged since it last made room, and Sweep forgets every
// state back to fresh. MaxKeys bounds the entries a store holds; see
// Options.
package memstore
