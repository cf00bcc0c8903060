package linkproxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/internal/linkproxy"
	"github.com/bouncerhq/bouncer/internal/redistest"
)

// TestRedis puts the shared test Redis behind a proxy: it answers PING
// through it; during a partition a client with a short timeout fails by
// its deadline, and after the heal the same client works again.
func TestRedis(t *testing.T) {
	p := newProxy(t, redistest.Addr(t), linkproxy.Options{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		got, err := c.Do(ctx, c.B().Ping().Build()).ToString()
		if err == nil && got != "PONG" {
			t.Fatalf("PING answered %q, want PONG", got)
		}
		return err
	}
	if err := ping(guard); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	before := p.Stats()
	if before.ToTarget == 0 || before.FromTarget == 0 {
		t.Errorf("got stats %+v, want bytes counted both ways", before)
	}

	p.Partition()
	if err := ping(wait); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING during a partition: %v, want %v", err, context.DeadlineExceeded)
	}
	p.Heal()
	if err := ping(guard); err != nil {
		t.Fatalf("PING after the heal: %v", err)
	}
	if after := p.Stats(); after.FromTarget <= before.FromTarget {
		t.Errorf("got %d bytes back after the heal, want more than %d", after.FromTarget, before.FromTarget)
	}
}
