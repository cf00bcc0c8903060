package memstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
)

// persistLimit is a day's budget: every key checked once keeps its state.
var persistLimit = bouncer.Limit{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 1_000_000, Period: 24 * time.Hour}

// filledStore returns a persistent store holding n keys' states.
func filledStore(b *testing.B, n int) *memstore.Store {
	b.Helper()
	s := memstore.New(memstore.Options{Persistent: true, MaxKeys: 2 * n})
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: []bouncer.Limit{persistLimit}}}, Cost: 1}
	for i := range n {
		req.Keys[0].Key = "user:" + strconv.Itoa(i)
		if d, err := s.Check(context.Background(), req); err != nil || !d.Allowed {
			b.Fatalf("filling: %+v %v", d, err)
		}
	}
	if got := s.Len(); got != n {
		b.Fatalf("Len = %d, want %d", got, n)
	}
	return s
}

func BenchmarkSave(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := filledStore(b, n)
			defer s.Close()
			path := filepath.Join(b.TempDir(), "state")
			var saved memstore.Saved
			for b.Loop() {
				var err error
				if saved, err = s.Save(path); err != nil || saved.States != n {
					b.Fatalf("Save = %+v, %v; want %d states", saved, err, n)
				}
			}
			b.ReportMetric(float64(saved.Bytes)/1e6, "MB")
			b.ReportMetric(float64(saved.Bytes)/float64(n), "bytes/key")
		})
	}
}

func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "state")
			s := filledStore(b, n)
			if _, err := s.Save(path); err != nil {
				b.Fatal(err)
			}
			s.Close()
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				t := memstore.New(memstore.Options{Persistent: true, MaxKeys: 2 * n})
				if ld, err := t.Load(path); err != nil || ld.States != n {
					b.Fatalf("Load = %+v, %v; want %d states", ld, err, n)
				}
				t.Close()
			}
			b.ReportMetric(float64(fi.Size())/1e6, "MB")
		})
	}
}

// BenchmarkCheckWhileSaving times every check, one caller, on a store of
// 1 M keys, while Save runs back to back in another goroutine and while
// nothing saves: known keys (lock-free) and new keys (inserted under the
// shard's lock, which a save holds while it copies the shard).
func BenchmarkCheckWhileSaving(b *testing.B) {
	const n = 1_000_000
	s := filledStore(b, n)
	defer s.Close()
	path := filepath.Join(b.TempDir(), "state")
	for _, saving := range []bool{false, true} {
		for _, keys := range []string{"known", "new"} {
			b.Run(fmt.Sprintf("saving=%t/keys=%s", saving, keys), func(b *testing.B) {
				stop, done := make(chan struct{}), make(chan int)
				go func() {
					saves := 0
					for saving {
						select {
						case <-stop:
							done <- saves
							return
						default:
						}
						if _, err := s.Save(path); err != nil {
							b.Error(err)
						}
						saves++
					}
					<-stop
					done <- saves
				}()
				lat := checkLatencies(b, s, keys == "new")
				close(stop)
				saves := <-done
				if saving && saves == 0 {
					b.Fatal("no save ran during the checks")
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
				b.ReportMetric(float64(lat[len(lat)*999/1000]), "p99.9-ns")
				b.ReportMetric(float64(lat[len(lat)-1]), "max-ns")
				b.ReportMetric(float64(saves), "saves")
			})
		}
	}
}

// checkLatencies checks keys in turn and returns each check's latency.
func checkLatencies(b *testing.B, s *memstore.Store, fresh bool) []int64 {
	req := bouncer.Request{Keys: []bouncer.KeyLimits{{Limits: []bouncer.Limit{persistLimit}}}, Cost: 1}
	lat := make([]int64, 0, 1<<20)
	i := 0
	prefix := "user:"
	if fresh {
		prefix = "new:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	}
	keys := make([]string, 4096)
	for b.Loop() {
		if i%len(keys) == 0 {
			b.StopTimer()
			for j := range keys {
				keys[j] = prefix + strconv.Itoa((i+j)%n1(fresh))
			}
			b.StartTimer()
		}
		req.Keys[0].Key = keys[i%len(keys)]
		t0 := time.Now()
		d, err := s.Check(context.Background(), req)
		lat = append(lat, int64(time.Since(t0)))
		if err != nil || !d.Allowed {
			b.Fatalf("check: %+v %v", d, err)
		}
		i++
	}
	return lat
}

// n1 is the range of key numbers: the filled keys, or unbounded new ones.
func n1(fresh bool) int {
	if fresh {
		return 1 << 62
	}
	return 1_000_000
}
