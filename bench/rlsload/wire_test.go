package rlsload

import (
	"math/rand/v2"
	"testing"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fieldNumber says that message m's field name has number num.
type fieldNumber struct {
	m    proto.Message
	name protoreflect.Name
	num  int
}

func TestWireFieldNumbers(t *testing.T) {
	checkFieldNumbers(t, []fieldNumber{
		{&rlspb.RateLimitResponse{}, "overall_code", rlsRespOverallCode},
		{&rlspb.RateLimitResponse{}, "statuses", rlsRespStatuses},
		{&rlspb.RateLimitResponse_DescriptorStatus{}, "current_limit", rlsStatusCurrentLimit},
		{&rlspb.RateLimitResponse_RateLimit{}, "requests_per_unit", rlsLimitRequestsPerUnit},
	})
}

func checkFieldNumbers(t *testing.T, fields []fieldNumber) {
	t.Helper()
	for _, f := range fields {
		d := f.m.ProtoReflect().Descriptor()
		if got := d.Fields().ByName(f.name).Number(); got != protoreflect.FieldNumber(f.num) {
			t.Errorf("%s.%s is field %d, want %d", d.FullName(), f.name, got, f.num)
		}
	}
}

// TestJudgeWire: the wire judges give the verdicts and errors of the
// judges of the generated messages, on random answers, answers given in
// two parts (which proto merges), and broken ones.
func TestJudgeWire(t *testing.T) {
	for _, p := range []Protocol{RLS, Gubernator} {
		t.Run(p.String(), func(t *testing.T) { testJudgeWire(t, p) })
	}
}

func testJudgeWire(t *testing.T, p Protocol) {
	random := needProtocol(t, p).random
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{1, 3} {
		for _, limit := range []int64{0, 5} {
			if p == Gubernator && limit == 0 {
				continue
			}
			cfg := Config{Addr: "x", Protocol: p, Keys: 10, Descriptors: d, Limit: limit}
			if err := cfg.setDefaults(); err != nil {
				t.Fatal(err)
			}
			w := workloads[p](&cfg)
			verdicts := map[outcome]int{}
			for i := range 3000 {
				b := marshal(t, random(rng, d))
				if i%3 == 0 { // a second part, merged into the first
					b = append(b, marshal(t, random(rng, rng.IntN(2)))...)
				}
				if i%50 == 0 && len(b) > 0 { // cut short
					b = b[:rng.IntN(len(b))]
				}
				resp := w.newResp()
				uerr := proto.Unmarshal(b, resp)
				o, err := w.judgeWire(0, b)
				if uerr != nil {
					if err == nil || o != failed {
						t.Errorf("%s: %x does not unmarshal (%v), judgeWire says %v, %v", p, b, uerr, o, err)
					}
					continue
				}
				wo, werr := w.judge(0, resp)
				if o != wo || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
					t.Errorf("%s: judgeWire(%v) = %v, %v; judge = %v, %v", p, resp, o, err, wo, werr)
				}
				verdicts[o]++
			}
			if len(verdicts) < 2 {
				t.Errorf("%s, %d descriptors, limit %d: verdicts %v, want a mix", p, d, limit, verdicts)
			}
		}
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomRLS returns a RateLimitResponse of about n statuses, mostly as
// the judges want, with the fields they do not read set too.
func randomRLS(rng *rand.Rand, n int) proto.Message {
	r := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_Code(rng.IntN(4))}
	if rng.IntN(4) == 0 {
		n += rng.IntN(3) - 1
	}
	for range n {
		st := &rlspb.RateLimitResponse_DescriptorStatus{
			Code:           rlspb.RateLimitResponse_Code(rng.IntN(3)),
			LimitRemaining: rng.Uint32(),
		}
		if rng.IntN(10) > 0 {
			rpu := uint32(5)
			if rng.IntN(10) == 0 {
				rpu = uint32(rng.IntN(7))
			}
			st.CurrentLimit = &rlspb.RateLimitResponse_RateLimit{Name: "lim", RequestsPerUnit: rpu, Unit: rlspb.RateLimitResponse_RateLimit_SECOND}
			st.DurationUntilReset = durationpb.New(1234567)
		}
		r.Statuses = append(r.Statuses, st)
	}
	if rng.IntN(2) == 0 {
		r.ResponseHeadersToAdd = []*corepb.HeaderValue{{Key: "x-ratelimit-limit", Value: "5"}}
		r.RawBody = []byte("body")
	}
	return r
}
