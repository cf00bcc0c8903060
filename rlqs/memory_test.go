package rlqs

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fleetConfig limits each tenant's route and method to 6000 requests a
// minute: an ordinary bucket id of three short entries.
const fleetConfig = `domain: bench
descriptors:
  - key: tenant
    descriptors:
      - key: route
        descriptors:
          - key: method
            rate_limit: {unit: minute, requests_per_unit: 6000}
`

// fleetReport is report's, for fleetConfig's ids: tenant t<i>, route
// /v1/orders, method GET.
func fleetReport(first, n int) *pb.RateLimitQuotaUsageReports {
	msg := report(first, n)
	for _, u := range msg.BucketQuotaUsages {
		u.BucketId.Bucket["route"], u.BucketId.Bucket["method"] = "/v1/orders", "GET"
	}
	return msg
}

// deepConfig limits every id of 8 entries k0..k7, whatever their
// values: a rule an attacker can fill with the longest ids allowed.
var deepConfig = func() string {
	var b strings.Builder
	b.WriteString("domain: bench\ndescriptors:\n")
	for i := range 8 {
		pad := strings.Repeat("    ", i)
		if i > 0 {
			b.WriteString(pad + "descriptors:\n")
		}
		fmt.Fprintf(&b, "%s  - key: k%d\n", pad, i)
	}
	b.WriteString(strings.Repeat("    ", 7) + "    rate_limit: {unit: minute, requests_per_unit: 6000}\n")
	return b.String()
}()

// hostileID is the id of deepConfig's bucket n: 8 entries of 4 KiB
// (rules.MaxValueLen), each distinct in its first bytes.
func hostileID(n int) map[string]string {
	id := make(map[string]string, 8)
	for i := range 8 {
		v := fmt.Sprint(n, "-", i, "-")
		id[fmt.Sprint("k", i)] = v + strings.Repeat("x", 4096-len(v))
	}
	return id
}

// hostileReport is a report of deepConfig's buckets first..first+n-1.
func hostileReport(first, n int) *pb.RateLimitQuotaUsageReports {
	msg := &pb.RateLimitQuotaUsageReports{Domain: "bench"}
	for i := range n {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &pb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &pb.BucketId{Bucket: hostileID(first + i)},
			TimeElapsed:        durationpb.New(DefaultInterval),
			NumRequestsAllowed: 400,
		})
	}
	return msg
}

// benchStream is a stream of s opened by the connection named peer, its
// domain bound to bench.
func benchStream(b *testing.B, s *Server, peer string) *stream {
	b.Helper()
	st, err := s.open(peer)
	if err != nil {
		b.Fatal(err)
	}
	st.domain = "bench"
	return st
}

// heapPerSubscription opens streams on s, one connection each, answers
// reports of each (stream i's report j is report(i, j)), and returns the
// live heap after GC that they added, per subscription s holds then.
// Every bucket reported must be held.
func heapPerSubscription(b *testing.B, s *Server, streams, reports int, report func(i, j int) *pb.RateLimitQuotaUsageReports) float64 {
	b.Helper()
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sts := make([]*stream, streams)
	for i := range sts {
		sts[i] = benchStream(b, s, fmt.Sprint("proxy", i))
		for j := range reports {
			sts[i].answer(ctx, report(i, j))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(sts)
	stats := s.Stats()
	if stats.Abandoned > 0 || stats.Subscriptions == 0 {
		b.Fatalf("%d subscriptions held, %d abandoned: want every bucket held", stats.Subscriptions, stats.Abandoned)
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(stats.Subscriptions)
}

// BenchmarkHostileMemory is BenchmarkFleetMemory's figure for the
// longest ids allowed: 10 streams (one connection each) of 100 buckets
// whose ids are 8 entries of 4 KiB, each bucket its own (1000
// subscriptions, 1000 buckets in the store and in the demands). What
// each holds of its id is id-bytes/subscription (its name and store
// key).
func BenchmarkHostileMemory(b *testing.B) {
	for b.Loop() {
		s := benchServerOf(b, deepConfig, nil)
		perSub := heapPerSubscription(b, s, 10, 10, func(i, j int) *pb.RateLimitQuotaUsageReports {
			return hostileReport(i*100+j*10, 10)
		})
		b.ReportMetric(perSub, "bytes/subscription")
		b.ReportMetric(float64(s.Stats().IDBytes)/float64(s.Stats().Subscriptions), "id-bytes/subscription")
	}
}

// For package rlqs_test's hostile test.
var (
	DeepConfig = deepConfig
	HostileID  = hostileID
)
