package bouncer

import (
	"context"
	"sync"
)

// eachChecker is the method of store.EachLimiter (a store's batch
// decision), which CheckEach uses when l has it.
type eachChecker interface {
	CheckEach(ctx context.Context, rs []Request, ds []Decision, errs []error)
}

// CheckEach decides each of rs on its own, with l's CheckEach if it has
// one, else with concurrent Checks (a single request is checked on the
// calling goroutine). It returns the decisions and errors, one per
// request, in ds and errs resized to len(rs): they are buffers, whose
// capacity is reused, and may be nil.
func CheckEach(ctx context.Context, l Limiter, rs []Request, ds []Decision, errs []error) ([]Decision, []error) {
	ds, errs = resize(ds, len(rs)), resize(errs, len(rs))
	if el, ok := l.(eachChecker); ok {
		el.CheckEach(ctx, rs, ds, errs)
	} else {
		checkConcurrently(ctx, l, rs, ds, errs)
	}
	return ds, errs
}

// resize returns s with length n, reusing its array when it is large
// enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
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
