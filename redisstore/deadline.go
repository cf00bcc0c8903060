package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// The client does not always return by a call's deadline: rueidis
// (v1.0.79) closes a new connection whose handshake ran out of time with
// a PING whose answer it waits up to a second for, and every caller
// waiting for that connection waits as long. Against a server that
// accepts connections but does not answer (frozen, overloaded, or behind
// a proxy), checks took a second instead of the deadline.
//
// So once a call has failed with a connection error or timeout, the calls
// of the next guardFor (at least twice the breaker's OpenFor, so that
// every probe is guarded) run in a goroutine of their own, and return by
// their deadline whatever the client does; an abandoned call finishes in
// the background, its reply discarded. Healthy calls pay nothing: the
// hand-off to a goroutine costs a few microseconds. The first call to
// fail after a healthy spell is not guarded.
const guardFor = 10 * time.Second

// epoch anchors the monotonic times of Store.guardUntil.
var epoch = time.Now()

// guard calls the function fn with ctx, and holds the call to ctx's
// deadline while calls run guarded (see guardFor); it loads the library
// on the nodes that miss it.
func (s *Store) guard(ctx context.Context, fn string, keys, args []string) rueidis.RedisResult {
	return guarded(s, ctx, func() rueidis.RedisResult {
		r := fcall(ctx, s.client, fn, keys, args)
		if missingFunction(r) {
			s.lib.load(ctx, s.client)
			r = fcall(ctx, s.client, fn, keys, args)
		}
		s.noteTrouble(ctx, r)
		return r
	}, rueidis.NewErrorResult)
}

// guarded returns do(), made with ctx; while calls run guarded (see
// guardFor), it runs do in a goroutine of its own and returns failed(ctx's
// error) when ctx is done first.
func guarded[T any](s *Store, ctx context.Context, do func() T, failed func(error) T) T {
	if time.Since(epoch) >= time.Duration(s.guardUntil.Load()) {
		return do()
	}
	done := make(chan T, 1)
	go func() { done <- do() }()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		select {
		case r := <-done: // it answered just in time
			return r
		default:
			return failed(ctx.Err())
		}
	}
}

// noteTrouble guards the calls of the next guardFor if r, the result of
// a call with ctx, failed for another reason than a Redis error reply or
// a caller that canceled.
func (s *Store) noteTrouble(ctx context.Context, r rueidis.RedisResult) {
	if r.NonRedisError() == nil || errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	d := max(guardFor, 2*s.breakers.openFor)
	s.guardUntil.Store(int64(time.Since(epoch) + d))
}
