// Package memstore is Bouncer's in-process store: every algorithm of
// package algo over sharded maps, safe for concurrent use, with no
// allocation per check on an existing key for the one-word algorithms.
//
// Keys are not kept: a store remembers each key by a 64-bit hash, seeded
// at random per store, and keeps per limit one map from that hash to the
// limit's state. A one-word algorithm (token bucket, GCRA, leaky bucket,
// fixed window) costs one map slot of 16 bytes per key; the sliding window
// counter two words; the log algorithms their entries. Two different keys
// share state only if their 64-bit hashes collide, which at ten million
// keys happens with probability about 3 × 10⁻⁶, and the random seed keeps
// clients from aiming for it.
//
// A check on one key locks one shard; a check on several keys locks their
// shards in order, so every check is one atomic step. Idle state is
// forgotten once it equals a fresh key's: each new key inserted samples a
// few entries of its table and evicts the expired ones, and Sweep evicts
// all of them. MaxKeys bounds the entries a store holds; see Options.
package memstore
