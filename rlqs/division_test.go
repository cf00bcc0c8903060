package rlqs

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"pgregory.net/rapid"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// propConfig limits one bucket to 30 requests a second.
const propConfig = `domain: prop
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 30}
`

// propStream is a stream of the property test, with the assignment it
// holds.
type propStream struct {
	st       *stream
	perSec   float64 // its demand
	assigned float64 // the rate of the assignment in force
}

// After every round in which every live client reports once, whatever
// the demands (changed at random between rounds), the clients that come
// and go, the order of the reports and the time_elapsed they give: the
// assignments in force add up to the rate at most; a client divided in
// the epoch's snapshot holds its max-min fair share (the least of its
// bounded demand and the water level of the snapshot) or, kept by
// hysteresis, up to 5 % less; a client new in the epoch holds what it
// claimed at most; and a connection's streams hold its share at most.
func TestSharesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
		s, store := propServer(rt, clock)
		defer store.Close()
		var live []*propStream
		conns := 0
		// Connections of one stream, in the last round and the one
		// before.
		alone, before := map[*conn]*propStream{}, map[*conn]*propStream{}
		open := func(peer string) {
			st, err := s.open(peer)
			if err != nil {
				rt.Fatal(err)
			}
			st.domain = "prop"
			live = append(live, &propStream{st: st})
		}
		for round := range rapid.IntRange(2, 8).Draw(rt, "rounds") {
			for range rapid.IntRange(0, 3).Draw(rt, "arrivals") {
				peer := fmt.Sprint("conn", conns)
				if len(live) > 0 && rapid.Bool().Draw(rt, "on a connection already open") {
					peer = live[rapid.IntRange(0, len(live)-1).Draw(rt, "which")].st.peer
				} else {
					conns++
				}
				open(peer)
			}
			for i := 0; i < len(live); i++ {
				if len(live) > 1 && rapid.IntRange(0, 5).Draw(rt, "leaves") == 0 {
					live[i].st.forget()
					live[i].st.close()
					live = append(live[:i], live[i+1:]...)
					i--
				}
			}
			for _, p := range live {
				p.perSec = rapid.SampledFrom([]float64{0, 0.5, 3, 9, 10, 15, 40, 1000}).Draw(rt, "demand")
			}
			for _, i := range rapid.Permutation(indexes(len(live))).Draw(rt, "order") {
				clock.Advance(time.Duration(rapid.IntRange(0, 100).Draw(rt, "ms")) * time.Millisecond)
				live[i].report(rt, s)
			}
			alone, before = checkDivision(rt, round, live, alone, before), alone
			clock.Advance(DefaultInterval - time.Duration(clock.Now().UnixMilli()%DefaultInterval.Milliseconds())*time.Millisecond)
		}
		for _, p := range live {
			p.st.forget()
			p.st.close()
		}
	})
}

func propServer(t *rapid.T, clock *storetest.Clock) (*Server, *memstore.Store) {
	cfg, err := rules.Parse("prop.yaml", []byte(propConfig))
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{Now: clock.Now})
	e := rules.NewEngine(cfg, store)
	e.Now = clock.Now
	s := &Server{Engine: e, Now: clock.Now, MaxConnStreams: 1 << 10} // as many streams a connection as the rounds open
	s.once.Do(s.init)
	return s, store
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// report reports an interval of p's demand, with a time_elapsed of any
// kind, and keeps its assignment.
func (p *propStream) report(t *rapid.T, s *Server) {
	elapsed := rapid.SampledFrom([]time.Duration{DefaultInterval, 0, -time.Second, time.Hour}).Draw(t, "time_elapsed")
	n := uint64(p.perSec * DefaultInterval.Seconds())
	resp := p.st.answer(context.Background(), &pb.RateLimitQuotaUsageReports{Domain: "prop", BucketQuotaUsages: []*pb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &pb.BucketId{Bucket: map[string]string{"api": "x"}}, NumRequestsAllowed: n / 2, NumRequestsDenied: n - n/2, TimeElapsed: durationpb.New(elapsed),
	}}})
	p.assigned = 0 // abandoned (idle): nothing in force
	if a := resp.GetBucketAction()[0].GetQuotaAssignmentAction(); a != nil {
		p.assigned = Rate(a.GetRateLimitStrategy())
	}
}

// checkDivision checks the assignments in force after a round, and
// returns the connections of one stream, with it; wasAlone is the last
// round's, and before the one before.
func checkDivision(t *rapid.T, round int, live []*propStream, wasAlone, before map[*conn]*propStream) map[*conn]*propStream {
	const eps = 1e-9
	sum := 0.0
	byPeer := map[*conn][]*propStream{}
	for _, p := range live {
		sum += p.assigned
		if sub := p.st.subs[bucketName(map[string]string{"api": "x"})]; sub != nil && sub.m != nil {
			byPeer[sub.m.p] = append(byPeer[sub.m.p], p)
		}
	}
	if sum > 30*(1+eps) {
		t.Fatalf("round %d: the assignments in force add up to %v, past 30", round, sum)
	}
	for c, ps := range byPeer {
		d := ps[0].st.subs[bucketName(map[string]string{"api": "x"})].m.d
		d.mu.Lock()
		demand, level, share, current := d.demands[c.id], d.level, c.share, c.epoch == d.epoch
		_, inSnapshot := d.shareOf(c.id)
		d.mu.Unlock()
		held := 0.0
		for _, p := range ps {
			held += p.assigned
		}
		if !current {
			t.Fatalf("round %d: client %s reported, and holds a share of epoch %d, not %d", round, c.id, c.epoch, d.epoch)
		}
		if held > share*(1+eps) {
			t.Fatalf("round %d: client %s's %d streams hold %v, past its share %v", round, c.id, len(ps), held, share)
		}
		if !inSnapshot {
			continue // a client new in the epoch: what it claimed
		}
		fair := min(demand, level)
		if share != fair {
			t.Fatalf("round %d: client %s has %v, want the least of its demand %v and the level %v", round, c.id, share, demand, level)
		}
		// A connection of one stream for two rounds (whose demand is
		// that stream's) holds its share (one whose streams changed
		// divides it by the streams' demands).
		if len(ps) == 1 && len(c.streams) == 1 && wasAlone[c] == ps[0] && before[c] == ps[0] && held < fair/1.05*(1-1e-6) {
			t.Fatalf("round %d: client %s holds %v, below its fair share %v less 5 %%", round, c.id, held, fair)
		}
	}
	checkLevel(t, byPeer)
	alone := map[*conn]*propStream{}
	for c, ps := range byPeer {
		if len(ps) == 1 && len(c.streams) == 1 {
			alone[c] = ps[0]
		}
	}
	return alone
}

// checkLevel checks that the snapshot's level is max-min: the shares of
// its demands use all of the rate unless every demand is met.
func checkLevel(t *rapid.T, byPeer map[*conn][]*propStream) {
	for _, ps := range byPeer {
		d := ps[0].st.subs[bucketName(map[string]string{"api": "x"})].m.d
		d.mu.Lock()
		defer d.mu.Unlock()
		used := 0.0
		for _, dem := range d.demands {
			used += min(dem, d.level)
		}
		if used > d.rate*(1+1e-9) || (!math.IsInf(d.level, 1) && used < d.rate*(1-1e-9)) {
			t.Fatalf("the snapshot %v at level %v uses %v of %v", d.demands, d.level, used, d.rate)
		}
		return
	}
}
