package algo_test

import (
	"fmt"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// A token bucket of 10 per second with room for a burst of 2: the third
// check at once is denied until a token has refilled, 100ms later.
func Example() {
	l := bouncer.Limit{Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 2}
	now := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()
	var s algo.State
	for range 3 {
		var r algo.Result
		s, r = algo.Check(l, s, now, 1)
		fmt.Printf("allowed %t, remaining %d, retry after %v\n", r.Allowed, r.Remaining, r.RetryAfter)
	}
	_, r := algo.Check(l, s, now+int64(100*time.Millisecond), 1)
	fmt.Printf("100ms later: allowed %t, remaining %d\n", r.Allowed, r.Remaining)
	// Output:
	// allowed true, remaining 1, retry after 0s
	// allowed true, remaining 0, retry after 0s
	// allowed false, remaining 0, retry after 100ms
	// 100ms later: allowed true, remaining 0
}
