package rls_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer/header"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rls"
	"github.com/bouncerhq/bouncer/rules"
)

// With DynamicMetadata, an answer carries the request and the merged
// metadata of the descriptors that passed, as envoyproxy/ratelimit's
// main sends it with RESPONSE_DYNAMIC_METADATA; without, none.
func TestDynamicMetadata(t *testing.T) {
	const config = `domain: d
descriptors:
  - key: svc1
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      name: service_1
      route: {cluster: one, weight: 1}
  - key: svc2
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata:
      name: service_2
      route: {cluster: two, zone: b}
      tags: [a, 1, true]
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {shadowed: yes}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {unlimited: true}
`
	c, err := rules.Parse("c.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	s := rls.New(rules.NewEngine(c, st), header.Off)
	req := &pb.RateLimitRequest{Domain: "d", HitsAddend: 1, Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: entries("svc1=x")},
		{Entries: entries("svc2=x"), HitsAddend: wrapperspb.UInt64(1)},
		{Entries: entries("shadow=x")},
		{Entries: entries("free=x")},
		{Entries: entries("other=x"), Limit: &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}},
	}}
	// show writes the dynamic metadata with sorted keys; an override's
	// limit, in protobuf's text form, which varies its spacing, as "set".
	show := func(resp *pb.RateLimitResponse) string {
		if resp.DynamicMetadata == nil {
			return "none"
		}
		m := resp.DynamicMetadata.AsMap()
		for _, d := range m["descriptors"].([]any) {
			if d := d.(map[string]any); d["limit"] != nil {
				d["limit"] = "set"
			}
		}
		return fmtAny(m)
	}
	resp, err := s.ShouldRateLimit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.DynamicMetadata != nil {
		t.Errorf("without DynamicMetadata: got %v, want none", resp.DynamicMetadata)
	}
	s.DynamicMetadata = true
	// svc1 is over its limit now, so its metadata is not sent; the shadow
	// rule is over too, but answered OK, so its is; the unlimited rule's
	// is not.
	resp, err = s.ShouldRateLimit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	const wantAll = "{descriptors:[{entries:[svc1=x]} {entries:[svc2=x] hitsAddend:1} {entries:[shadow=x]} {entries:[free=x]} {entries:[other=x] limit:set}] " +
		"domain:d hitsAddend:1 metadata:{name:service_2 route:{cluster:two zone:b} shadowed:true tags:[a 1 true]}}"
	if got := show(resp); got != wantAll {
		t.Errorf("second call:\ngot  %s\nwant %s", got, wantAll)
	}
	// A request where both pass merges them: the first descriptor's values
	// win, and mappings under one key are merged.
	st2 := memstore.New(memstore.Options{})
	t.Cleanup(func() { st2.Close() })
	fresh := rls.New(rules.NewEngine(c, st2), header.Off)
	fresh.DynamicMetadata = true
	resp, err = fresh.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: req.Descriptors[:2]})
	if err != nil {
		t.Fatal(err)
	}
	const want = "{descriptors:[{entries:[svc1=x]} {entries:[svc2=x] hitsAddend:1}] domain:d metadata:{name:service_1 route:{cluster:one weight:1 zone:b} tags:[a 1 true]}}"
	if got := show(resp); got != want {
		t.Errorf("both pass:\ngot  %s\nwant %s", got, want)
	}
}

// fmtAny writes a Struct's value with sorted keys: "{k:v k:v}", "[a b]".
func fmtAny(v any) string {
	switch v := v.(type) {
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			parts = append(parts, k+":"+fmtAny(v[k]))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmtAny(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return fmt.Sprint(v)
	}
}
