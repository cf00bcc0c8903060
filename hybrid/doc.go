// Package hybrid decides limits shared by many instances mostly locally:
// a bouncer.Limiter in front of a shared store (Redis) and a local one
// (memory). Each limit says how by its Mode:
//
//   - Strict: every check goes to the shared store, as if the hybrid
//     limiter were not there.
//   - Lease: the instance takes quota from the shared store in leases
//     (charges of many units at once) and spends it locally. The shared
//     store never counts more than the limit: no fixed window admits more
//     than its rate, and a bucket at most rate × LeaseTime more than it
//     would alone.
//   - Async: the instance decides on its own view of the shared count and
//     pushes what it admitted every SyncInterval, all keys in one batch;
//     the reply brings the shared count back into the view. It admits at
//     most (instances − 1) × AsyncBound over the limit.
//
// Lease and async limits also keep an over-limit cache (a key denied
// until T is denied locally until T, for the denied cost or more) and a
// local pre-throttle (the whole limit applied in the local store first,
// so that no instance admits more of a key than the limit and a flood on
// one key stops at the instance). docs/hybrid.md has each mode's
// guarantee and the measured figures.
package hybrid
