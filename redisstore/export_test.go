package redisstore

import "time"

// PinClock makes the store made from o decide at now() instead of Redis's
// TIME, so that the conformance suite's fake clock drives it.
func PinClock(o *Options, now func() time.Time) { o.now = now }
