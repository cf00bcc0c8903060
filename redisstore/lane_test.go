package redisstore

import (
	"context"
	"testing"
	"time"
)

// A lane's next call leaves out the waiters whose callers have gone
// (wait marked them gone) or are going (their context is done, and wait
// returns without a reply): a check sent for nobody would be charged in
// Redis for nobody, and take a place in the batch.
func TestTakeSkipsCallersGone(t *testing.T) {
	s := &Store{timeout: time.Minute, batch: DefaultBatch}
	var l lane
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	live := s.enqueue(context.Background(), &l, &part{})
	s.enqueue(canceled, &l, &part{})
	s.enqueue(expired, &l, &part{})
	s.enqueue(context.Background(), &l, &part{}).state.Store(gone)
	batch := s.take(&l)
	if len(batch) != 1 || batch[0] != live {
		t.Fatalf("take: %d waiters; want 1, the one whose caller waits", len(batch))
	}
	if len(l.queue) != 0 {
		t.Fatalf("%d waiters left queued; want none", len(l.queue))
	}
}
