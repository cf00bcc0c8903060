// Package redisstore is the Redis store: a bouncer.Limiter whose state
// lives in Redis or Redis Cluster, so that many Bouncer instances share
// one limit.
//
// The store's Lua is one Redis function library (Redis 7 or later),
// composed from small files (lua/): one per algorithm, each the twin of
// its Go definition in package algo, and one function per operation
// (check, refund, reset). A check is one FCALL that reads Redis's clock
// (TIME), decides all the check's limits and charges them only if all
// allow; checks that arrive while calls are in flight share the next call
// (Options.InFlight, Batch). The library computes the same integers as
// algo at every magnitude, a year's spans included, so a Redis store
// decides as the in-memory store does for the same times and costs; the
// conformance suite (storetest) holds it to that.
//
// Keys: a key's state is kept under a digest of the key, never the key
// itself: one-word states in a small hash shared with the other keys of
// its bucket, Redis key "<prefix>:<limit id>:{<group tag>}<bucket>",
// field the key's 8-byte digest; a log (sliding window log, concurrency)
// in a sorted set of its own, "<hash key>:<digest>". All limits of one
// key share the hash tag, so they land in one Cluster slot and one call,
// and every key a call touches is among its KEYS. Client-controlled
// values never reach a Redis key name: no value can open or close a hash
// tag or fake a separator, and key names have a fixed, short length.
// Every write keeps the TTL of what it writes covering its state, so
// idle state vanishes.
//
// Failures: every call has a deadline (Options.Timeout, 50 ms by
// default); a check whose reply is late decides by its limits'
// bouncer.StoreErrorPolicy (local by default: a per-instance in-memory
// limit; or allow, or deny), and the decision is marked Degraded. A late
// reply is slow, not a failure: one circuit breaker per Redis node opens
// only when the node fails a liveness probe or most of its calls fail,
// and tries it again after OpenFor, jittered so that instances whose
// breakers opened together (a restart, a failover) do not come back
// together. A store starts while Redis is down and connects in the
// background, with a jittered backoff. Store.Health says what the store knows:
// its counts, and each node's breaker and counts.
//
// What every call keeps, whatever path it takes: a request whose keys
// share a group (one Cluster slot, or a standalone server) is one script
// call, decided and charged all or nothing there; a request whose keys
// span groups is one call per group in turn, and when one denies or
// fails the groups charged before it are refunded (a limit that charges
// denied checks, ChargeDenied, keeps its charge). Checks queue in lanes,
// one per group: a check goes out at once while fewer than
// Options.InFlight of its lane's calls are in flight, else with what
// queued meanwhile (up to Options.Batch), and a check whose caller gave
// up before its call went out is never sent, so never charged. A call
// is tried again while its slot migrates, never past its deadline, and
// its outcome counts toward its node's breaker; while the breaker is
// open, a call goes alone, refused or let through as a trial. Refunds
// never raise a limit above its capacity.
//
// docs/redis.md describes deployment, key layout, memory and failure
// policies.
package redisstore
