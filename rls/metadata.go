package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/bouncerhq/bouncer/rules"
)

// Metadata is the dynamic metadata of the answer resp to in, as
// envoyproxy/ratelimit's main writes it: "domain"; "descriptors", each
// with its "entries" as "key=value" strings, its override as "limit" (in
// protobuf text form) and its "hitsAddend"; the request's "hitsAddend"
// when not 0; and "metadata", the config metadata of every descriptor
// that passed (answered OK under a limit: shadow-mode ones over their
// limit included, unlimited and replaced ones not), merged in the
// request's order: a key already set keeps its value, and two mappings
// under one key are merged the same way.
func Metadata(in *pb.RateLimitRequest, resp *rules.Response) *structpb.Struct {
	descs := make([]any, 0, len(in.GetDescriptors()))
	for _, d := range in.GetDescriptors() {
		entries := make([]any, len(d.GetEntries()))
		for i, e := range d.GetEntries() {
			entries[i] = e.GetKey() + "=" + e.GetValue()
		}
		f := map[string]any{"entries": entries}
		if l := d.GetLimit(); l != nil {
			f["limit"] = l.String()
		}
		if h := d.GetHitsAddend(); h != nil {
			f["hitsAddend"] = float64(h.GetValue())
		}
		descs = append(descs, f)
	}
	fields := map[string]any{"domain": in.GetDomain(), "descriptors": descs}
	if h := in.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = float64(h)
	}
	passed := map[string]any{}
	for i := range resp.Statuses {
		st := &resp.Statuses[i]
		if st.Code == rules.OK && st.Limit != nil && !st.Unlimited && st.Rule != nil && st.Rule.Metadata != nil {
			merge(passed, st.Rule.Metadata)
		}
	}
	if len(passed) > 0 {
		fields["metadata"] = passed
	}
	// The config's metadata holds only the types a Struct takes
	// (yamlconf's free-form values), so this cannot fail.
	s, _ := structpb.NewStruct(fields)
	return s
}

// merge adds src's keys to dst: a key dst has keeps its value, except
// that two mappings are merged. dst's mappings are its own copies, never
// src's, which belong to the config.
func merge(dst, src map[string]any) {
	for k, v := range src {
		sv, isMap := v.(map[string]any)
		switch dv, ok := dst[k]; {
		case !ok && isMap:
			m := map[string]any{}
			merge(m, sv)
			dst[k] = m
		case !ok:
			dst[k] = v
		case isMap:
			if dm, ok := dv.(map[string]any); ok {
				merge(dm, sv)
			}
		}
	}
}
