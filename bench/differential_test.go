package bench

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/bench/refsvc"
	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/redisstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
)

// TestDifferentialEnvoyRatelimit sends one seeded random stream of
// ShouldRateLimit calls to envoyproxy/ratelimit (on Redis) and to Bouncer
// serving the same config file (on the memory store, and on Redis), and
// requires identical responses: overall code, and per descriptor the
// code, current limit, remaining and duration until reset.
//
// The configs are testdata/differential.yaml, one of every feature of that
// project's format, and the example configs that ship with
// envoyproxy/ratelimit, read from its module as they are.
func TestDifferentialEnvoyRatelimit(t *testing.T) {
	addrs := redisAddrs(t, redisTopologies[0])
	configs := map[string]string{"differential.yaml": readFile(t, "testdata/differential.yaml")}
	dir := ratelimitModuleDir(t)
	examples, err := filepath.Glob(filepath.Join(dir, "examples", "ratelimit", "config", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example configs in envoyproxy/ratelimit's module at %s (%v)", dir, err)
	}
	for _, e := range examples {
		configs["envoyproxy-ratelimit/"+filepath.Base(e)] = readFile(t, e)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BOUNCER_DIFF_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	calls := 300
	if s := os.Getenv("BOUNCER_DIFF_CALLS"); s != "" {
		fmt.Sscan(s, &calls)
	}
	t.Logf("seed %d (BOUNCER_DIFF_SEED reruns it), %d calls per config (BOUNCER_DIFF_CALLS)", seed, calls)
	total := map[pb.RateLimitResponse_Code]int{}
	quotaChanged := 0 // answers asMain changed: the stream took quota-mode rules over their limits
	shared := 0       // overrides sent on a limited rule's entries, sharing its count
	t.Cleanup(func() {
		if !t.Skipped() && shared == 0 {
			t.Errorf("no override on a limited rule's entries; want some, to compare shared counts")
		}
		if !t.Skipped() && quotaChanged == 0 {
			t.Errorf("no answer of a quota-mode rule over its limit; want some, to compare main's quota results")
		}
		// And, over all configs, crossed them, not only stayed under.
		if !t.Skipped() && (total[pb.RateLimitResponse_OK] == 0 || total[pb.RateLimitResponse_OVER_LIMIT] == 0) {
			t.Errorf("statuses seen over all configs: %v; want both OK and OVER_LIMIT", total)
		}
	})
	for name, body := range configs {
		t.Run(name, func(t *testing.T) {
			cfg, err := rules.Parse(name, []byte(body))
			if err != nil {
				t.Fatalf("Bouncer does not load %s unchanged: %v", name, err)
			}
			ref := startRLS(t, refsvc.EnvoyRatelimit{RedisAddrs: addrs, Config: body, Env: []string{"RESPONSE_DYNAMIC_METADATA=true"}}.Start)
			mem := memstore.New(memstore.Options{})
			t.Cleanup(func() { mem.Close() })
			red, err := redisstore.New(redisstore.Options{Client: redisstore.ClientOption(addrs), Prefix: "diff" + strings.ReplaceAll(runID, "-", "") + fmt.Sprint(seed%1000), Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { red.Close() })
			targets := []struct {
				name   string
				client pb.RateLimitServiceClient
			}{
				{"bouncer/memory", serveInProcess(t, cfg, mem, false)},
				{"bouncer/redis", serveInProcess(t, cfg, red, true)},
			}
			envoy := dial(t, ref.Addr)
			quotaRules := rules.NewEngine(cfg, mem)
			gen := newStream(t, body, seed, quotaRules)
			seen := map[string]int{}
			split := 0 // calls not compared: the services counted them in different seconds
			for i := range calls {
				req := gen.next()
				awayFromSecondBoundary()
				now := time.Now()
				want, werr := envoy.ShouldRateLimit(t.Context(), req)
				if werr == nil {
					pinned := want
					if want = asMain(want, req, quotaRules, now); !proto.Equal(pinned, want) {
						quotaChanged++
					}
				}
				gots, gerrs := make([]*pb.RateLimitResponse, len(targets)), make([]error, len(targets))
				for k, tg := range targets {
					gots[k], gerrs[k] = tg.client.ShouldRateLimit(t.Context(), req)
				}
				if end := time.Now(); !sameSecond(now, end) {
					// The services counted this call in different
					// seconds (a busy machine stalled them past
					// awayFromSecondBoundary's margin): compare it not,
					// and start again once every window it split has
					// turned.
					split++
					afterSplit(now, end)
					continue
				}
				for k, tg := range targets {
					got, gerr := gots[k], gerrs[k]
					if (werr != nil) != (gerr != nil) {
						t.Fatalf("call %d %v: envoyproxy/ratelimit error %v, %s error %v", i, req, werr, tg.name, gerr)
					}
					if werr != nil {
						continue
					}
					if !proto.Equal(normalize(want), normalize(got)) {
						t.Fatalf("call %d, seed %d:\nrequest         %v\nenvoy-ratelimit %v\n%-15s %v", i, seed, req, want, tg.name, got)
					}
				}
				if werr == nil {
					for _, st := range want.Statuses {
						kind := st.Code.String()
						if st.CurrentLimit != nil {
							kind += " limited"
						}
						seen[kind]++
						total[st.Code]++
					}
				}
			}
			shared += gen.shared
			// The stream must have reached the config's limits.
			if seen["OK limited"]+seen["OVER_LIMIT limited"] == 0 {
				t.Errorf("statuses seen: %v; want some under a limit", seen)
			}
			if split > calls/2 {
				t.Errorf("%d of %d calls fell across a second boundary: too few compared", split, calls)
			}
			t.Logf("%d calls (%d not compared: across a second boundary): statuses %v; %d answers so far as main gives them, not as the pinned version", calls, split, seen, quotaChanged)
		})
	}
}

// awayFromSecondBoundary waits out the last 30ms of a second, so that the
// calls of one request to each service fall in the same second: the same
// windows, and the same whole-second duration_until_reset.
func awayFromSecondBoundary() {
	now := time.Now()
	if left := time.Second - time.Duration(now.Nanosecond()); left < 30*time.Millisecond {
		time.Sleep(left + 2*time.Millisecond)
	}
}

func sameSecond(a, b time.Time) bool { return a.Truncate(time.Second).Equal(b.Truncate(time.Second)) }

// afterSplit waits, after a call that started at start and ended at end
// in a later second, until every window the services may have counted it
// in differently has turned: the next second's, or, if the call crossed
// a minute, the next minute's. (A call across an hour would split the
// hour's windows until the next hour: at 300 calls of a few milliseconds
// in a run, not seen.)
func afterSplit(start, end time.Time) {
	next := end.Truncate(time.Second).Add(time.Second)
	if start.Truncate(time.Minute) != end.Truncate(time.Minute) {
		next = end.Truncate(time.Minute).Add(time.Minute)
	}
	time.Sleep(time.Until(next) + 2*time.Millisecond)
}

// asMain turns the pinned envoyproxy/ratelimit's answer into the one its
// main branch gives since it fixed quota results, after the pinned
// version (the module proxy serves none newer, and the project's one
// release tag is older still). The pinned version answers a quota-mode
// descriptor over its limit with OK, its current limit and remaining,
// and no duration_until_reset, and never lets it deny the request. Main
// leaves its OVER_LIMIT answer as it is, duration included, and denies
// the request when every quota-mode descriptor of it is over the limit.
// A limited OK without a duration is how the pinned version's rewrite
// shows (every other limited answer has one); which descriptors are in
// quota mode, passing ones included, is read from the config's rules.
func asMain(r *pb.RateLimitResponse, req *pb.RateLimitRequest, e *rules.Engine, now time.Time) *pb.RateLimitResponse {
	r = proto.Clone(r).(*pb.RateLimitResponse)
	quota, over := 0, 0
	for i, st := range r.Statuses {
		if st.CurrentLimit == nil || !quotaMode(e, req.Domain, req.Descriptors[i]) {
			continue
		}
		quota++
		if st.Code == pb.RateLimitResponse_OK && st.DurationUntilReset == nil {
			sec := unitSeconds[st.CurrentLimit.Unit]
			st.Code, st.DurationUntilReset = pb.RateLimitResponse_OVER_LIMIT, durationpb.New(time.Duration(sec-now.Unix()%sec)*time.Second)
		}
		if st.Code == pb.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	if quota > 0 && over == quota {
		r.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	return r
}

// quotaMode reports whether d, without an override of its own, finds a
// quota-mode rule.
func quotaMode(e *rules.Engine, domain string, d *rlpb.RateLimitDescriptor) bool {
	if d.Limit != nil {
		return false
	}
	entries := make([]rules.Entry, len(d.Entries))
	for i, en := range d.Entries {
		entries[i] = rules.Entry{Key: en.Key, Value: en.Value}
	}
	k, err := e.Resolve(domain, entries)
	return err == nil && k.Rule != nil && k.Rule.QuotaMode
}

// unitSeconds is each unit's window, as envoyproxy/ratelimit counts them.
var unitSeconds = map[pb.RateLimitResponse_RateLimit_Unit]int64{
	pb.RateLimitResponse_RateLimit_SECOND: 1, pb.RateLimitResponse_RateLimit_MINUTE: 60,
	pb.RateLimitResponse_RateLimit_HOUR: 3600, pb.RateLimitResponse_RateLimit_DAY: 86400,
	pb.RateLimitResponse_RateLimit_WEEK: 7 * 86400, pb.RateLimitResponse_RateLimit_MONTH: 30 * 86400,
	pb.RateLimitResponse_RateLimit_YEAR: 365 * 86400,
}

// normalize keeps what both services define: envoyproxy/ratelimit leaves
// out fields it has no value for in the same way Bouncer does, so the
// messages compare as they are, minus headers (none from either here) and
// as below.
func normalize(r *pb.RateLimitResponse) *pb.RateLimitResponse {
	c := proto.Clone(r).(*pb.RateLimitResponse)
	c.ResponseHeadersToAdd = nil
	// The pinned version's dynamic metadata has quota fields that main
	// took out (main adds the config's metadata instead, which the pinned
	// version refuses in a config, so these configs have none).
	if md := c.GetDynamicMetadata(); md != nil {
		delete(md.Fields, "quotaModeViolations")
		delete(md.Fields, "quotaModeEnabled")
	}
	// An override goes into the dynamic metadata in protobuf's text
	// form, whose spacing each binary varies on purpose.
	for _, d := range c.GetDynamicMetadata().GetFields()["descriptors"].GetListValue().GetValues() {
		if l := d.GetStructValue().GetFields()["limit"]; l != nil {
			l.Kind = &structpb.Value_StringValue{StringValue: strings.Join(strings.Fields(l.GetStringValue()), " ")}
		}
	}
	return c
}

func serveInProcess(t *testing.T, cfg *rules.Config, lim bouncer.Limiter, concurrent bool) pb.RateLimitServiceClient {
	t.Helper()
	e := rules.NewEngine(cfg, lim)
	e.Concurrent = concurrent
	g := grpc.NewServer()
	s := rls.New(e, header.Off)
	s.DynamicMetadata = true
	s.Register(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return dial(t, l.Addr().String())
}

func dial(t *testing.T, addr string) pb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ratelimitModuleDir is where the go command keeps the pinned
// envoyproxy/ratelimit module's source.
func ratelimitModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/envoyproxy/ratelimit").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/envoyproxy/ratelimit: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		out, err := exec.Command("go", "mod", "download", "-json", "github.com/envoyproxy/ratelimit").Output()
		if err != nil {
			t.Fatalf("go mod download github.com/envoyproxy/ratelimit: %v", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), `"Dir": "`); ok {
				dir = strings.TrimSuffix(v, `",`)
			}
		}
	}
	return dir
}

// stream makes random requests for one config: descriptors along the
// config's own branches (values from the config, from small pools where
// it matches any value or a prefix, and now and then a value or an entry
// it does not know), one to three per request, with random hits (now and
// then many, as a request sent at a stream's end carries). Now and
// then a descriptor sets its own limit, whose rate changes from call to
// call, so that a count is read against another limit mid-window: on
// entries of its own, or on a config branch's, where it shares the
// count of the rule those entries match.
type stream struct {
	rnd    *rand.Rand
	domain string
	paths  [][]entryGen
	rules  *rules.Engine // Bouncer's engine of the config, to find the rule an override shares
	shared int           // overrides sent on a limited rule's entries
}

type entryGen struct {
	key    string
	values []string // candidates; a few per entry, so that limits are crossed
}

type yamlDescriptor struct {
	Key         string           `yaml:"key"`
	Value       string           `yaml:"value"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

func newStream(t *testing.T, body string, seed uint64, e *rules.Engine) *stream {
	t.Helper()
	var f struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors"`
	}
	if err := yaml.Unmarshal([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	s := &stream{rnd: rand.New(rand.NewPCG(seed, 7)), domain: f.Domain, rules: e}
	var walk func(prefix []entryGen, ds []yamlDescriptor)
	walk = func(prefix []entryGen, ds []yamlDescriptor) {
		for _, d := range ds {
			var values []string
			switch {
			case d.Value == "":
				values = []string{"v1", "v2", "v3"}
			case strings.HasSuffix(d.Value, "*"):
				p := strings.TrimSuffix(d.Value, "*")
				values = []string{p + "a", p + "b", p, "zz" + p}
			default:
				values = []string{d.Value, d.Value, d.Value, d.Value + "x"}
			}
			path := append(append([]entryGen(nil), prefix...), entryGen{key: d.Key, values: values})
			s.paths = append(s.paths, path)
			walk(path, d.Descriptors)
		}
	}
	walk(nil, f.Descriptors)
	if len(s.paths) == 0 {
		t.Fatal("the config has no descriptors")
	}
	return s
}

func (s *stream) next() *pb.RateLimitRequest {
	r := s.rnd
	req := &pb.RateLimitRequest{Domain: s.domain}
	if r.IntN(40) == 0 {
		req.Domain = "no-such-domain"
	}
	switch r.IntN(12) {
	case 0, 1, 2:
		req.HitsAddend = uint32(r.IntN(3))
	case 3:
		// A request Envoy sends at the stream's end (apply_on_stream_done):
		// the hits the response reported, often past the limits, charged
		// whatever the count.
		req.HitsAddend = uint32(5 + r.IntN(36))
	}
	for range 1 + r.IntN(3) {
		path := s.paths[r.IntN(len(s.paths))]
		if r.IntN(6) == 0 {
			path = path[:r.IntN(len(path))+1] // a shorter descriptor
		}
		d := &rlpb.RateLimitDescriptor{}
		for _, e := range path {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: e.key, Value: e.values[r.IntN(len(e.values))]})
		}
		if r.IntN(10) == 0 {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "extra", Value: "1"}) // deeper than the config
		}
		switch r.IntN(16) {
		case 0:
			d = overrideDescriptor(r)
		case 1:
			d.Limit = s.overrideOnRule(d)
		}
		if r.IntN(4) == 0 {
			d.HitsAddend = wrapperspb.UInt64(uint64(r.IntN(4))) // 0 peeks
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// overrideOnRule is a limit for d, a descriptor along a config branch, in
// the unit of the limited rule its entries match, whose count the
// override then shares (in minutes when none does). envoyproxy/ratelimit
// keys a count by the entries and the window's start, not by the limit,
// so another unit's count would be shared too in a window starting at the
// same second (a minute's first second), which Bouncer keeps apart.
func (s *stream) overrideOnRule(d *rlpb.RateLimitDescriptor) *rlpb.RateLimitDescriptor_RateLimitOverride {
	entries := make([]rules.Entry, len(d.Entries))
	for i, e := range d.Entries {
		entries[i] = rules.Entry{Key: e.Key, Value: e.Value}
	}
	u := typepb.RateLimitUnit_MINUTE
	if k, err := s.rules.Resolve(s.domain, entries); err == nil && k.Rule != nil {
		u = rlsUnits[k.Rule.Unit]
		s.shared++
	}
	return &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(s.rnd.IntN(6)), Unit: u}
}

// rlsUnits is the RLS unit of each of Bouncer's (7 is WEEK, which Envoy
// sends though the generated enum names it not).
var rlsUnits = map[rules.Unit]typepb.RateLimitUnit{
	rules.UnitSecond: typepb.RateLimitUnit_SECOND, rules.UnitMinute: typepb.RateLimitUnit_MINUTE,
	rules.UnitHour: typepb.RateLimitUnit_HOUR, rules.UnitDay: typepb.RateLimitUnit_DAY,
	rules.UnitWeek: 7, rules.UnitMonth: typepb.RateLimitUnit_MONTH, rules.UnitYear: typepb.RateLimitUnit_YEAR,
}

// overrideDescriptor is a descriptor with a limit of its own, on an entry
// no config names and with a value per unit (see overrideOnRule).
func overrideDescriptor(r *rand.Rand) *rlpb.RateLimitDescriptor {
	// 7 is WEEK, which Envoy sends though the generated enum names it not.
	units := []typepb.RateLimitUnit{typepb.RateLimitUnit_SECOND, typepb.RateLimitUnit_MINUTE, 7}
	rates := []uint32{0, 2, 3, 5}
	u := units[r.IntN(len(units))]
	return &rlpb.RateLimitDescriptor{
		Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "bouncer_override", Value: fmt.Sprint(u, r.IntN(2))}},
		Limit: &rlpb.RateLimitDescriptor_RateLimitOverride{
			RequestsPerUnit: rates[r.IntN(len(rates))],
			Unit:            u,
		},
	}
}
