package redisstore

import (
	"time"

	"github.com/bouncerhq/bouncer"
)

// PinClock makes the store made from o decide at now() instead of Redis's
// TIME, so that the conformance suite's fake clock drives it.
func PinClock(o *Options, now func() time.Time) { o.now = now }

// BucketOf returns the bucket of key in a store of DefaultBuckets.
func BucketOf(key string) uint64 { return digestOf(key, DefaultBuckets).bucket }

// LimitID is limitID, the name of a limit's state in Redis keys.
func LimitID(l bouncer.Limit) string { return limitID(l) }

// StateOf returns the Redis hash and field that hold key's one-word state
// under l in a store of prefix and DefaultBuckets.
func StateOf(prefix string, l bouncer.Limit, key string) (hash, field string) {
	return hashField(prefix, limitID(l), digestOf(key, DefaultBuckets))
}
