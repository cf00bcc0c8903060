package redisstore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Batching. Every script call costs Redis a fixed price — parsing the
// command, converting its arguments, running the script's preamble, and on
// a Cluster wrapping the script's writes for the replicas — besides the
// work of each check. Checks that arrive while others are in flight are
// merged into one script call — on a standalone server (or Sentinel),
// where every key lives on one node, any checks; on a Cluster, the checks
// of one limit whose keys one node serves (see slots.go): the script
// decides them one after another, each as if it were a call of its own,
// so nothing about a check's meaning changes.
//
// Checks queue in lanes, each with up to a few workers that take what has
// queued (up to batchMax checks) as one batch. A lane runs one worker
// while few callers wait, and starts another (up to its cap) only once a
// lane's busy threshold of callers queue behind the calls in flight: more
// calls in flight, each smaller, cost Redis and the store more per check,
// and a worker that finds fewer than the threshold waiting after its batch
// stops if others run. The threshold counts callers, not checks: a caller
// of CheckEach queues its checks together and waits for them all, so its
// three checks (say) are one wait a worker more would shorten, not three.
// (Counted by checks, a service answering three descriptors a call sent
// batches of 24 checks rather than 30, and 13 % fewer calls a second; see
// docs/redis.md.) A standalone server has one lane of up to batchWorkers
// workers, busy at batchBusy callers. On a Cluster, a check goes to the
// lane of the node that serves its key (by the store's map of slots; one
// lane may serve several nodes of a large Cluster), whose workers (up to
// clusterLaneWorkers, busy at a full batch) batch for that node alone: a
// batch is then as large as the checks that queued for the node while its
// calls were in flight, not a share of what queued for every node.
//
// A worker that has handed out a batch's replies yields (runtime.Gosched)
// twice before it takes the next batch, and again while the queue grows
// meanwhile (up to batchYields times): the callers it has just woken run
// first, and their next checks join that batch rather than the one after.
// (With one yield, the batches on a Cluster held 11.4 checks a call; with
// these, 12.5, for 3–7 % more decisions a second in interleaved runs.)
// A worker that finds nothing to do for batchIdle stops, and the next
// check starts one again, so an idle store runs no goroutine.
const (
	batchWorkers       = 4
	batchBusy          = batchMax / 4
	clusterLanes       = 16
	clusterLaneWorkers = 2
	clusterLaneBusy    = batchMax
	batchMax           = 64
	batchIdle          = 100 * time.Millisecond
	batchYields        = 4
)

type batcher struct {
	s      *Store
	lanes  []lane
	closed atomic.Bool
	wg     sync.WaitGroup
}

// lane is a queue of checks and the workers that batch them.
type lane struct {
	in      chan *waiter
	max     int32        // workers at most
	busy    int32        // a worker more once this many callers queue
	waiting atomic.Int32 // callers with checks queued in, counted by their first (waiter.lead)
	mu      sync.Mutex   // guards changes to workers
	workers atomic.Int32 // read without mu on the fast path of ensureWorker
}

// waiter is one check waiting for its batch.
type waiter struct {
	ctx      context.Context // the caller's
	c        *call
	deadline time.Time        // the earlier of ctx's and the store's Timeout from the check's start
	done     chan batchReply  // buffered: a worker never blocks on it
	timer    *time.Timer      // fires at deadline when armed; stopped between uses
	armed    bool             // timer is set
	fire     <-chan time.Time // fires at deadline: timer's, or that of its caller's first waiter
	queued   bool             // sent to the workers
	lead     bool             // its caller's first check in its lane: counts in lane.waiting
	err      error            // why it was not, if not
}

// waiters recycles the waiters whose reply was received: a worker sends
// one reply and then forgets the waiter, but a waiter whose check gave up
// may still get one, so it is left to the garbage collector. A waiter
// brings its own timer, so that a check waits for its deadline without
// making a context (and a timer) of its own; the checks of one caller of
// CheckEach, which share a deadline, wait on the timer of the first.
var waiters = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{done: make(chan batchReply, 1), timer: t}
}}

// expired reports whether w's caller gave up or its deadline passed.
func (w *waiter) expired() bool {
	return w.ctx.Err() != nil || !time.Now().Before(w.deadline)
}

type batchReply struct {
	res     []result
	allowed bool
	err     error
}

func newBatcher(s *Store) *batcher {
	n, w, busy := 1, batchWorkers, batchBusy
	if s.cluster {
		n, w, busy = clusterLanes, clusterLaneWorkers, clusterLaneBusy
	}
	b := &batcher{s: s, lanes: make([]lane, n)}
	for i := range b.lanes {
		b.lanes[i].in = make(chan *waiter, 4*batchMax)
		b.lanes[i].max, b.lanes[i].busy = int32(w), int32(busy)
	}
	return b
}

// laneOf returns the lane of c: on a Cluster, that of the node that serves
// its first key by the store's map of slots (the first lane without a
// map); otherwise the one lane.
func (b *batcher) laneOf(c *call) *lane {
	if len(b.lanes) == 1 {
		return &b.lanes[0]
	}
	var n uint16
	if m := b.s.slots.cur.Load(); m != nil {
		n = m.node[keySlot(c.keys[0])]
	}
	return &b.lanes[int(n)%len(b.lanes)]
}

// do runs c, a check's one call, in a batch, and returns by ctx's deadline
// or the store's Timeout, whichever comes first. It keeps the store's
// accounts per check, as run does: a check that times out in the queue
// timed out on Redis.
func (b *batcher) do(ctx context.Context, c *call) ([]result, bool, error) {
	if b.closed.Load() {
		return b.s.run(ctx, c)
	}
	w := b.enqueue(ctx, c, b.deadline(ctx), b.laneOf(c), true, nil)
	r, free := b.wait(ctx, w)
	if free {
		w.recycle()
	}
	return r.res, r.allowed, r.err
}

// doEach runs the calls cs, each of its own check, as do runs one: queued
// together, they go out in the same batches when they fit. It stores
// their replies in rs.
func (b *batcher) doEach(ctx context.Context, cs []*call, rs []batchReply) {
	dl := b.deadline(ctx)
	var buf [8]*waiter
	var lbuf [8]*lane
	ws, lanes := buf[:0], lbuf[:0]
	var fire <-chan time.Time
	for _, c := range cs {
		l := b.laneOf(c)
		lead := !slices.Contains(lanes, l)
		if lead {
			lanes = append(lanes, l)
		}
		w := b.enqueue(ctx, c, dl, l, lead, fire)
		fire = w.fire
		ws = append(ws, w)
	}
	for i, w := range ws {
		var free bool
		if rs[i], free = b.wait(ctx, w); !free {
			ws[i] = nil // a worker may hold it yet
		}
	}
	// Only now: the first waiter's timer serves the others' waits.
	for _, w := range ws {
		if w != nil {
			w.recycle()
		}
	}
}

// deadline is the earlier of ctx's deadline and the store's Timeout from
// now.
func (b *batcher) deadline(ctx context.Context) time.Time {
	dl := time.Now().Add(b.s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	return dl
}

// enqueue queues c in l, its lane, for a batch, unless ctx is done or dl
// passes first, and returns its waiter. lead says c is its caller's first
// check in l. fire, if not nil, fires at dl: that of the caller's first
// waiter, which w shares (see waiter.passed); otherwise w arms its own.
func (b *batcher) enqueue(ctx context.Context, c *call, dl time.Time, l *lane, lead bool, fire <-chan time.Time) *waiter {
	w := waiters.Get().(*waiter)
	w.ctx, w.c, w.deadline, w.lead = ctx, c, dl, lead
	if w.fire = fire; fire == nil {
		w.timer.Reset(time.Until(dl))
		w.armed, w.fire = true, w.timer.C
	}
	b.s.calls.Add(1)
	if err := ctx.Err(); err != nil {
		w.err = wrap(err)
		return w
	}
	if lead {
		l.waiting.Add(1)
	}
	select {
	case l.in <- w:
		w.queued = true
	default:
		if w.passed() {
			w.err = wrap(context.DeadlineExceeded)
			break
		}
		select {
		case l.in <- w:
			w.queued = true
		case <-w.fire:
			w.err = wrap(context.DeadlineExceeded)
		case <-ctx.Done():
			w.err = wrap(ctx.Err())
		}
	}
	switch {
	case w.queued:
		b.ensureWorker(l)
	case lead:
		l.waiting.Add(-1)
	}
	return w
}

// wait returns w's reply, or an error once ctx is done or w's deadline
// passes, and keeps the store's accounts. free says no worker holds w any
// more, which may then be recycled.
func (b *batcher) wait(ctx context.Context, w *waiter) (r batchReply, free bool) {
	switch {
	case !w.queued:
		r.err, free = w.err, true
	default:
		select {
		case r = <-w.done: // the common case of a caller's second check and on
			free = true
		default:
			if w.passed() {
				r.err = wrap(context.DeadlineExceeded)
				break
			}
			select {
			case r = <-w.done:
				free = true
			case <-w.fire:
				r.err = wrap(context.DeadlineExceeded)
			case <-ctx.Done():
				r.err = wrap(ctx.Err())
			}
			if r.err != nil {
				// A caller that ran late may find its deadline passed and
				// its reply in at once: select picks either, and the reply
				// must win.
				select {
				case r = <-w.done:
					free = true
				default:
				}
			}
		}
	}
	if !errors.Is(r.err, errBreakerOpen) {
		b.s.record(ctx, b.s.nodeOf(w.c), false, r.err)
	}
	return r, free
}

// passed reports whether w's deadline has passed, for a waiter about to
// block on w.fire: a timer shared by a caller's waiters fires once, and
// the wait it ended may have been another's. Until the deadline, it has
// not fired.
func (w *waiter) passed() bool {
	return !w.armed && !time.Now().Before(w.deadline)
}

// recycle returns w, which no worker holds, to the pool.
func (w *waiter) recycle() {
	if w.armed {
		w.timer.Stop()
	}
	*w = waiter{done: w.done, timer: w.timer}
	waiters.Put(w)
}

// ensureWorker starts a worker of l unless enough run. A worker that
// stops for idleness checks under the same lock that the queue is empty,
// so a check queued meanwhile always finds one. Under load every worker
// runs, and a check sees so without taking the lock: workers only falls
// under mu, one worker at a time, and a worker that saw the queue empty
// before the check was queued leaves the others, which see it, running.
func (b *batcher) ensureWorker(l *lane) {
	if n := l.workers.Load(); n >= l.max || n > 0 && l.waiting.Load() < l.busy {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.workers.Load()
	if b.closed.Load() || n >= l.max || (n > 0 && l.waiting.Load() < l.busy) {
		return
	}
	l.workers.Add(1)
	b.wg.Add(1)
	go b.work(l)
}

func (b *batcher) work(l *lane) {
	defer b.wg.Done()
	idle := time.NewTimer(batchIdle)
	defer idle.Stop()
	batch := make([]*waiter, 0, batchMax)
	for {
		select {
		case w := <-l.in:
			l.took(w)
			batch = append(batch[:0], w)
		collect:
			for len(batch) < batchMax {
				select {
				case w := <-l.in:
					l.took(w)
					batch = append(batch, w)
				default:
					break collect
				}
			}
			b.s.runBatch(batch)
			n := len(batch)
			clear(batch)
			if b.spare(l) {
				return
			}
			if n > 1 { // callers wait together: let those just answered queue again
				l.yield()
			}
			idle.Reset(batchIdle)
		case <-idle.C:
			l.mu.Lock()
			if len(l.in) == 0 || b.closed.Load() {
				l.workers.Add(-1)
				l.mu.Unlock()
				return
			}
			l.mu.Unlock()
			idle.Reset(batchIdle)
		}
	}
}

// yield lets the callers a worker of l has just answered run before it
// takes its next batch, so that their next checks join it: it yields
// (runtime.Gosched) twice, and again while the queue grew during the last
// yield, up to batchYields times in all.
func (l *lane) yield() {
	runtime.Gosched()
	q := len(l.in)
	for range batchYields - 1 {
		runtime.Gosched()
		n := len(l.in)
		if n <= q {
			return
		}
		q = n
	}
}

// took counts w, which a worker has just taken from l.in, out of
// l.waiting if it is its caller's first check in l.
func (l *lane) took(w *waiter) {
	if w.lead {
		l.waiting.Add(-1)
	}
}

// spare reports whether a worker of l, which has just run a batch, is
// one more than its lane needs: others run, and fewer than l.busy callers
// wait. The worker then stops (and spare counts it out).
func (b *batcher) spare(l *lane) bool {
	if l.workers.Load() == 1 || l.waiting.Load() >= l.busy {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.workers.Load() == 1 || l.waiting.Load() >= l.busy {
		return false
	}
	l.workers.Add(-1)
	return true
}

// close stops the workers once they are idle and waits for them.
func (b *batcher) close() {
	b.closed.Store(true)
	b.wg.Wait()
}

// runBatch makes one script call for each run of checks of ws that share
// a pinned time (tests pin time; otherwise it is always ""), and hands
// each check its part of the reply.
func (s *Store) runBatch(ws []*waiter) {
	// A check whose caller gave up, or whose deadline passed, while it
	// waited has returned already: it must not be charged.
	live := ws[:0]
	for _, w := range ws {
		if !w.expired() {
			live = append(live, w)
		}
	}
	ws = live
	for len(ws) > 0 {
		n := 1
		for n < len(ws) && ws[n].c.args[0] == ws[0].c.args[0] {
			n++
		}
		if s.cluster {
			s.runNodeBatches(ws[:n])
		} else {
			s.runOneBatch(ws[:n])
		}
		ws = ws[n:]
	}
}

// runNodeBatches makes one script call for the checks of ws whose keys
// each node serves, all at once (see slots.go). Without a map of slots,
// each check makes a call of its own.
func (s *Store) runNodeBatches(ws []*waiter) {
	m := s.slotMap(ws[0].deadline)
	if m == nil {
		s.runAlone(ws)
		return
	}
	// Group the checks by node, each group in the order of ws.
	var gbuf [8][]*waiter
	var nbuf [8]uint16
	groups, nodes := gbuf[:0], nbuf[:0]
	for _, w := range ws {
		n := m.node[keySlot(w.c.keys[0])]
		g := slices.Index(nodes, n)
		if g < 0 {
			nodes = append(nodes, n)
			groups = append(groups, make([]*waiter, 0, len(ws)))
			g = len(groups) - 1
		}
		groups[g] = append(groups[g], w)
	}
	var wg sync.WaitGroup
	for g, gws := range groups {
		switch {
		case nodes[g] == 0: // a slot no master serves: let rueidis find one
			s.runAlone(gws)
		case g == len(groups)-1:
			s.runOneBatch(gws)
		default:
			wg.Go(func() { s.runOneBatch(gws) })
		}
	}
	wg.Wait()
}

// runAlone makes one call for each check of ws, all at once, each by its
// own deadline, and returns when they are done.
func (s *Store) runAlone(ws []*waiter) {
	var wg sync.WaitGroup
	for i, w := range ws {
		one := func() {
			var r batchReply
			if w.expired() {
				r.err = wrap(context.DeadlineExceeded)
			} else {
				ctx, cancel := context.WithDeadline(context.Background(), w.deadline)
				resp := s.call(ctx, w.c)
				cancel()
				r.res, r.allowed, r.err = parseReply(resp, w.c)
			}
			w.done <- r
		}
		if i == len(ws)-1 {
			one()
		} else {
			wg.Go(one)
		}
	}
	wg.Wait()
}

// runOneBatch makes one script call for the checks of ws. The call's
// deadline is the earliest of theirs.
func (s *Store) runOneBatch(ws []*waiter) {
	var keys, args []string
	deadline := ws[0].deadline
	packed := true
	for _, w := range ws {
		if w.deadline.Before(deadline) {
			deadline = w.deadline
		}
		packed = packed && w.c.packable()
	}
	if packed { // always on a Cluster (see Store.batchable)
		cs := make([]*call, len(ws))
		for i, w := range ws {
			cs[i] = w.c
			if !s.cluster {
				keys = append(keys, w.c.keys...)
			}
		}
		if s.cluster {
			keys = ws[0].c.keys[:1] // routes the call; the keys go as arguments
		}
		args = packedArgs(ws[0].c.args[0], cs, s.cluster)
	} else {
		args = batchArgs(ws, &keys)
	}
	reply := func(r batchReply) {
		for _, w := range ws {
			w.done <- r
		}
	}
	if s.nodeOf(ws[0].c).open.Load() {
		reply(batchReply{err: errBreakerOpen})
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	resp := s.exec(ctx, &call{keys: keys, args: args})
	if s.cluster {
		s.nodeReply(ws, resp)
		return
	}
	if packed {
		b, err := resp.ToString()
		if err == nil && len(b) != packedReplyLen*len(ws) {
			err = errors.New("malformed script reply")
		}
		if err != nil {
			reply(batchReply{err: wrap(err)})
			return
		}
		deliverPacked(ws, b)
		return
	}
	vals, err := resp.AsIntSlice()
	if err == nil && len(vals) != replyLen(ws) {
		err = errors.New("malformed script reply")
	}
	if err != nil {
		reply(batchReply{err: wrap(err)})
		return
	}
	for _, w := range ws {
		n := 1 + 5*len(w.c.limits)
		res, allowed, perr := parseVals(w.c, vals[:n])
		w.done <- batchReply{res: res, allowed: allowed, err: perr}
		vals = vals[n:]
	}
}

// batchArgs returns the arguments of a batch of the checks of ws in the
// general format ("b"), and appends their keys to keys.
func batchArgs(ws []*waiter, keys *[]string) []string {
	args := []string{ws[0].c.args[0], strconv.Itoa(len(ws)), "b"}
	for _, w := range ws {
		a := w.c.args // pinned, cost, mode, L, then limitArgs per limit
		args = append(args, a[1], a[3])
		for i := 4; i < len(a); i += limitArgs {
			ki, _ := strconv.Atoi(a[i])
			args = append(args, strconv.Itoa(ki+len(*keys)))
			args = append(args, a[i+1:i+limitArgs]...)
		}
		*keys = append(*keys, w.c.keys...)
	}
	return args
}

// nodeReply hands each check of ws, a Cluster's batch, its part of resp:
// the packed replies of the checks the script decided, and the error that
// stopped it part way, if one did (see "On a Cluster" in check.lua). When
// the error says a key was elsewhere, the checks from there on go again, a
// call each, and the map of slots is read again; otherwise they fail with
// it.
func (s *Store) nodeReply(ws []*waiter, resp rueidis.RedisResult) {
	msgs, err := resp.ToArray()
	var b string
	if err == nil {
		if len(msgs) == 0 || len(msgs) > 2 {
			err = errors.New("malformed script reply")
		} else {
			b, err = msgs[0].ToString()
		}
	}
	var stop string
	if err == nil && len(msgs) == 2 {
		stop, err = msgs[1].ToString()
	}
	if err == nil && (len(b)%packedReplyLen != 0 || len(b) > packedReplyLen*len(ws) ||
		stop == "" && len(b) != packedReplyLen*len(ws)) {
		err = errors.New("malformed script reply")
	}
	if err != nil {
		for _, w := range ws {
			w.done <- batchReply{err: wrap(err)}
		}
		return
	}
	decided := len(b) / packedReplyLen
	deliverPacked(ws[:decided], b)
	rest := ws[decided:]
	switch {
	case len(rest) == 0:
	case routingError(stop):
		s.slots.stale.Store(true)
		s.rerouted.Add(uint64(len(rest)))
		s.runAlone(rest)
	default:
		for _, w := range rest {
			w.done <- batchReply{err: wrap(errors.New(stop))}
		}
	}
}

// deliverPacked hands each check of ws its reply from b, their packed
// replies one after another.
func deliverPacked(ws []*waiter, b string) {
	for _, w := range ws {
		res, allowed, perr := parsePacked(w.c, b[:packedReplyLen])
		w.done <- batchReply{res: res, allowed: allowed, err: perr}
		b = b[packedReplyLen:]
	}
}

func replyLen(ws []*waiter) int {
	n := 0
	for _, w := range ws {
		n += 1 + 5*len(w.c.limits)
	}
	return n
}
