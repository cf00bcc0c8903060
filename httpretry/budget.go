package httpretry

import "sync"

// Budget is a token bucket of retries shared by every request through one
// Transport, so that retries cannot multiply the load on a server that is
// failing (the AWS SDKs' retry quota, gRPC's retry throttling): each
// retry takes one token, each success gives back Refill tokens, up to
// Tokens, and a failure that finds less than one token is returned
// without retry. A success is an answer below 500 other than 429.
//
// The zero value is a budget with the defaults. A Budget is safe for
// concurrent use; its fields must not change after first use.
type Budget struct {
	// Tokens is the bucket's capacity and its content at first use: how
	// many retries can follow one another with no success in between.
	// Zero means 10.
	Tokens float64

	// Refill is what one success gives back, in tokens. Zero means 0.1:
	// once the first Tokens are spent, at most one retry per ten
	// successes.
	Refill float64

	mu      sync.Mutex
	left    float64
	started bool
}

// take spends a token for one retry, and reports whether there was one.
func (b *Budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.start()
	if b.left < 1 {
		return false
	}
	b.left--
	return true
}

// succeed gives back what one success earns.
func (b *Budget) succeed() {
	refill := b.Refill
	if refill == 0 {
		refill = 0.1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.start()
	b.left = min(b.left+refill, b.capacity())
}

func (b *Budget) start() {
	if !b.started {
		b.left, b.started = b.capacity(), true
	}
}

func (b *Budget) capacity() float64 {
	if b.Tokens == 0 {
		return 10
	}
	return b.Tokens
}
