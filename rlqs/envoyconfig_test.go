package rlqs_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The Envoy configuration in docs/rlqs.md is read into Envoy's own types,
// every typed config resolved, and validated as Envoy validates it.
func TestDocsEnvoyConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/rlqs.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## Envoy's configuration")
	_, after, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(after, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/rlqs.md has no yaml block under \"Envoy's configuration\"")
	}
	var top map[string][]any
	if err := yaml.Unmarshal([]byte(block), &top); err != nil {
		t.Fatal(err)
	}
	if len(top["http_filters"]) != 2 || len(top["clusters"]) != 1 {
		t.Fatalf("got %d filters and %d clusters, want 2 and 1", len(top["http_filters"]), len(top["clusters"]))
	}
	read := func(v any, m proto.Message) {
		t.Helper()
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(js, m); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		validate(t, m)
	}
	for _, f := range top["http_filters"] {
		var filter hcm.HttpFilter
		read(f, &filter)
		inner, err := filter.GetTypedConfig().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		validate(t, inner)
	}
	var c cluster.Cluster
	read(top["clusters"][0], &c)
	for _, opt := range c.GetTypedExtensionProtocolOptions() {
		inner, err := opt.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		validate(t, inner)
	}
}

// validate runs m's generated validation, nested messages and typed
// configs (Any) included.
func validate(t *testing.T, m proto.Message) {
	t.Helper()
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%T: %v", m, err)
		}
	}
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %v", a.GetTypeUrl(), err)
			return
		}
		validate(t, inner)
	}
}
