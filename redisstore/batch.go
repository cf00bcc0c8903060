package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Batching. Every script call costs Redis a fixed price — reading the
// command, converting its arguments, the script's preamble, a round trip
// and its system calls — besides the work of each check. Checks queue in
// lanes: one for a standalone server (or Sentinel's master), one per
// group on a Cluster (whose keys share a slot, as a script's keys must).
// A check that finds fewer than Options.InFlight calls of its lane in
// flight makes its call at once, from its own goroutine: no hand-off, no
// waiting for others. A check that finds them all in flight waits in the
// lane's queue; when a call ends, what queued meanwhile (up to
// Options.Batch checks) goes out as one call, made by a goroutine that
// goes on while the queue holds checks and then stops. The script decides
// a call's checks one after another, each as a call of its own would.
//
// A check waits for its reply until its deadline (the caller's, or
// Timeout from its start), whatever its call does; a check whose caller
// gave up before its call went out is never sent, so never charged.

// The batching defaults (Options.InFlight, Batch and Groups):
// docs/redis.md says what each trades and how they were chosen.
const (
	DefaultInFlight        = 4 // a standalone server's one lane
	DefaultClusterInFlight = 1 // each group's lane on a Cluster
	DefaultBatch           = 64
	DefaultGroups          = 8
)

type lane struct {
	mu       sync.Mutex
	inflight int
	queue    []*waiter
}

// waiter is one part waiting in a lane.
type waiter struct {
	p        *part
	ctx      context.Context
	deadline time.Time
	done     chan laneReply // buffered: a sender never blocks on it
	state    atomic.Int32   // queued, taken or gone
}

const (
	queued int32 = iota // in the queue
	taken               // in a call
	gone                // its caller gave up before it was taken
)

type laneReply struct {
	res []result
	err error
}

var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan laneReply, 1)} }}

// laneOf returns p's lane.
func (s *Store) laneOf(p *part) *lane {
	if !s.cluster {
		return &s.lanes[0]
	}
	return &s.lanes[p.group%len(s.lanes)]
}

// submit decides p, a request's one part, in its lane: at once if a call
// of the lane is free, else in the next call with what queued meanwhile.
func (s *Store) submit(ctx context.Context, p *part) ([]result, error) {
	l := s.laneOf(p)
	s.calls.Add(1)
	l.mu.Lock()
	if l.inflight < s.inFlight {
		l.inflight++
		l.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		res, err := s.script(cctx, opCheck, []*part{p})
		cancel()
		s.release(l)
		s.record(ctx, s.breakerOf(p), false, err)
		if err != nil {
			return nil, err
		}
		return res[0], nil
	}
	w := s.enqueue(ctx, l, p)
	l.mu.Unlock()
	return s.wait(w)
}

// submitEach decides each of ps, each a request's one part, as submit does: those of a
// lane with a free call go out together at once (the first lane's from
// this goroutine), the others queue.
func (s *Store) submitEach(ctx context.Context, ps []*part) ([][]result, []error) {
	res, errs := make([][]result, len(ps)), make([]error, len(ps))
	var ws []*waiter
	var wi []int
	type run struct {
		l  *lane
		ps []*part
		at []int
	}
	var runs []run
	for i, p := range ps {
		l := s.laneOf(p)
		s.calls.Add(1)
		r := -1
		for k := range runs {
			if runs[k].l == l && len(runs[k].ps) < s.batch {
				r = k
				break
			}
		}
		if r >= 0 {
			runs[r].ps, runs[r].at = append(runs[r].ps, p), append(runs[r].at, i)
			continue
		}
		l.mu.Lock()
		if l.inflight < s.inFlight {
			l.inflight++
			l.mu.Unlock()
			runs = append(runs, run{l: l, ps: []*part{p}, at: []int{i}})
			continue
		}
		w := s.enqueue(ctx, l, p)
		l.mu.Unlock()
		ws, wi = append(ws, w), append(wi, i)
	}
	var wg sync.WaitGroup
	for k, r := range runs {
		do := func() {
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			out, err := s.script(cctx, opCheck, r.ps)
			cancel()
			s.release(r.l)
			for j, i := range r.at {
				s.record(ctx, s.breakerOf(r.ps[j]), false, err)
				if err != nil {
					errs[i] = err
				} else {
					res[i] = out[j]
				}
			}
		}
		if k == 0 {
			do()
		} else {
			wg.Go(do)
		}
	}
	for k, w := range ws {
		res[wi[k]], errs[wi[k]] = s.wait(w)
	}
	wg.Wait()
	return res, errs
}

// enqueue queues p in l, whose lock is held, and returns its waiter.
func (s *Store) enqueue(ctx context.Context, l *lane, p *part) *waiter {
	w := waiters.Get().(*waiter)
	w.p, w.ctx = p, ctx
	w.deadline = time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(w.deadline) {
		w.deadline = d
	}
	w.state.Store(queued)
	l.queue = append(l.queue, w)
	return w
}

// wait returns w's reply, or an error once its caller gives up or its
// deadline passes, and keeps the store's accounts.
func (s *Store) wait(w *waiter) ([]result, error) {
	var r laneReply
	timer := time.NewTimer(time.Until(w.deadline))
	select {
	case r = <-w.done:
	case <-timer.C:
		r.err = wrap(context.DeadlineExceeded)
	case <-w.ctx.Done():
		r.err = wrap(w.ctx.Err())
	}
	timer.Stop()
	recycle := r.err == nil
	if r.err != nil {
		// A caller that ran late may find its deadline passed and its
		// reply in at once: select picks either, and the reply must win.
		select {
		case r = <-w.done:
			recycle = true
		default:
			// Queued, it is dropped when taken; taken, its call replies
			// into done later. Either way a lane still holds it.
			w.state.CompareAndSwap(queued, gone)
		}
	}
	if !errors.Is(r.err, errBreakerOpen) {
		s.record(w.ctx, s.breakerOf(w.p), false, r.err)
	}
	if recycle {
		*w = waiter{done: w.done}
		waiters.Put(w)
	}
	return r.res, r.err
}

// release hands l's call back: to a goroutine that sends what queued, or,
// with nothing queued, to the lane.
func (s *Store) release(l *lane) {
	l.mu.Lock()
	batch := s.take(l)
	if batch == nil {
		l.inflight--
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	s.wg.Add(1)
	go s.drain(l, batch)
}

// take removes up to Options.Batch waiters from l's queue, whose lock is
// held, skipping those whose callers have gone, or are going: a waiter
// whose context is done returns without its reply (wait marks it gone).
func (s *Store) take(l *lane) []*waiter {
	var batch []*waiter
	n := 0
	for n < len(l.queue) && len(batch) < s.batch {
		w := l.queue[n]
		n++
		if w.ctx.Err() == nil && w.state.CompareAndSwap(queued, taken) {
			batch = append(batch, w)
		}
	}
	clear(l.queue[:n])
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = l.queue[:0:0]
	}
	return batch
}

// drain sends batches of l's queue until it is empty.
func (s *Store) drain(l *lane, batch []*waiter) {
	defer s.wg.Done()
	for batch != nil {
		s.sendBatch(batch)
		l.mu.Lock()
		batch = s.take(l)
		if batch == nil {
			l.inflight--
		}
		l.mu.Unlock()
	}
}

// sendBatch makes one call for the checks of ws, by the latest of their
// deadlines (each of them returns by its own), and hands each its reply.
func (s *Store) sendBatch(ws []*waiter) {
	ps := make([]*part, len(ws))
	deadline := ws[0].deadline
	for i, w := range ws {
		ps[i] = w.p
		if w.deadline.After(deadline) {
			deadline = w.deadline
		}
	}
	if s.breakerOf(ps[0]).open.Load() {
		for _, w := range ws {
			w.done <- laneReply{err: errBreakerOpen}
		}
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	out, err := s.script(ctx, opCheck, ps)
	cancel()
	for i, w := range ws {
		if err != nil {
			w.done <- laneReply{err: err}
		} else {
			w.done <- laneReply{res: out[i]}
		}
	}
}
