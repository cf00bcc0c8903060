package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// valueKeys returns the dotted paths of vals's keys, descending into a
// map only where the schema node lists the map's properties: a map whose
// keys are the user's (files, labels, resources) is one value.
func valueKeys(t *testing.T, prefix string, vals map[string]any, schema map[string]any) []string {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	var out []string
	for k, v := range vals {
		p := prefix + k
		node, ok := props[k].(map[string]any)
		if !ok {
			t.Errorf("values.yaml: %s is not in values.schema.json", p)
			continue
		}
		out = append(out, p)
		if sub, ok := v.(map[string]any); ok && node["properties"] != nil {
			out = slices.DeleteFunc(out, func(s string) bool { return s == p })
			out = append(out, valueKeys(t, p+".", sub, node)...)
		}
	}
	return out
}

// schemaKeys returns the dotted paths of the schema's leaf properties.
func schemaKeys(prefix string, schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	var out []string
	for k, v := range props {
		node, _ := v.(map[string]any)
		if node["properties"] != nil {
			out = append(out, schemaKeys(prefix+k+".", node)...)
		} else {
			out = append(out, prefix+k)
		}
	}
	return out
}

var readmeRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// TestValuesDocumented checks that every key of values.yaml is typed in
// values.schema.json, which is draft-07 and refuses unknown keys, and is
// a row of README.md's table of values; and that neither has a key
// values.yaml does not.
func TestValuesDocumented(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var vals, schema map[string]any
	if err := yaml.Unmarshal(read("values.yaml"), &vals); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(read("values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema["$schema"]; got != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("values.schema.json $schema: got %v, want draft-07", got)
	}
	if schema["additionalProperties"] != false {
		t.Error("values.schema.json: additionalProperties is not false at the top")
	}
	keys := valueKeys(t, "", vals, schema)
	slices.Sort(keys)
	if got := slices.Sorted(slices.Values(schemaKeys("", schema))); !slices.Equal(got, keys) {
		t.Errorf("values.schema.json's leaves:\n%v\nvalues.yaml's keys:\n%v", got, keys)
	}
	readme := string(read("README.md"))
	_, table, _ := strings.Cut(readme, "## Values\n")
	var rows []string
	for _, m := range readmeRow.FindAllStringSubmatch(table, -1) {
		rows = append(rows, m[1])
	}
	slices.Sort(rows)
	if !slices.Equal(rows, keys) {
		t.Errorf("README.md's table of values:\n%v\nvalues.yaml's keys:\n%v", rows, keys)
	}
}
