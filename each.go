package bouncer

import (
	"context"
	"sync"
)

// EachLimiter is a Limiter that decides several independent requests in
// one go, as Check would decide each of them (concurrently, in no
// particular order): a store with round trips makes them together rather
// than one each. The Redis store implements it.
type EachLimiter interface {
	Limiter
	// CheckEach decides rs[i] into ds[i] and errs[i], for every i; ds and
	// errs are as long as rs.
	CheckEach(ctx context.Context, rs []Request, ds []Decision, errs []error)
}

// CheckEach decides each of rs on its own into ds and errs, which are as
// long as rs: with l's CheckEach if it has one, else with concurrent
// Checks (a single request is checked on the calling goroutine).
func CheckEach(ctx context.Context, l Limiter, rs []Request, ds []Decision, errs []error) {
	if el, ok := l.(EachLimiter); ok {
		el.CheckEach(ctx, rs, ds, errs)
		return
	}
	checkConcurrently(ctx, l, rs, ds, errs)
}

// checkConcurrently decides each of rs on its own with l.Check, all at
// once (a single request on the calling goroutine), into ds and errs.
func checkConcurrently(ctx context.Context, l Limiter, rs []Request, ds []Decision, errs []error) {
	if len(rs) == 1 {
		ds[0], errs[0] = l.Check(ctx, rs[0])
		return
	}
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() { ds[i], errs[i] = l.Check(ctx, rs[i]) })
	}
	wg.Wait()
}
