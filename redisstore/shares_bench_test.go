package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/redisstore"
)

// BenchmarkExchangeShares measures an exchange of async shares from one
// caller, as a hybrid sync makes it, through a store at its defaults: of
// 1, 64 and 256 pairs, each holding the shares of 3 instances (the caller's
// and two others', which each exchange returns). Besides ns/op (an
// exchange) it reports "µs/pair" and, on the standalone server,
// "fcall-µs/pair" (the usec of FCALL in INFO commandstats: Redis's own
// time; whatever else the server runs meanwhile counts too).
func BenchmarkExchangeShares(b *testing.B) {
	for _, tp := range topologies {
		for _, n := range []int{1, 64, 256} {
			b.Run(fmt.Sprintf("%s/pairs=%d/instances=3", tp.name, n), func(b *testing.B) {
				c, err := rueidis.NewClient(redisstore.ClientOption(addrs(b, tp.env)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(c.Close)
				s := newStore(b, c, redisstore.Options{Timeout: redisstore.DefaultTimeout})
				pairs, mine := sharePairs(n, "bench")
				for _, inst := range []string{"b", "c", "a"} {
					for i := range mine {
						mine[i].Instance = inst
					}
					if _, err := s.ExchangeShares(b.Context(), time.Minute, pairs, mine); err != nil {
						b.Fatal(err)
					}
				}
				before := redisUsage(b, c)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					others, err := s.ExchangeShares(b.Context(), time.Minute, pairs, mine)
					if err != nil {
						b.Fatal(err)
					}
					if len(others) != n || len(others[n-1]) != 2 {
						b.Fatalf("got %d lists, the last of %d shares; want %d of 2", len(others), len(others[n-1]), n)
					}
				}
				b.StopTimer()
				perPair := float64(b.N) * float64(n)
				b.ReportMetric(float64(b.Elapsed().Microseconds())/perPair, "µs/pair")
				if tp.name == "standalone" {
					after := redisUsage(b, c)
					b.ReportMetric(float64(after.fcallUsec-before.fcallUsec)/perPair, "fcall-µs/pair")
				}
			})
		}
	}
}
