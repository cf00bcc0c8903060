package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// complete sets what the file leaves to defaults, and resolves its paths
// against the file's directory.
func (c *Config) complete() {
	rel := relativeTo(filepath.Dir(c.File))
	c.Rules = rel(c.Rules)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	for i := range c.Listeners {
		l := &c.Listeners[i]
		l.Line = c.line(fmt.Sprintf("listeners[%d]", i))
		if t := l.TLS; t != nil {
			t.CertFile, t.KeyFile, t.ClientCAFile = rel(t.CertFile), rel(t.KeyFile), rel(t.ClientCAFile)
			if t.ClientCAFile != "" && t.ClientAuth == "" {
				t.ClientAuth = "require" // a CA to check clients against means client certificates
			}
		}
	}
	for name, a := range c.Auth {
		if j := a.JWT; j != nil {
			j.Name = name
			for k := range j.Keys {
				j.Keys[k].File, j.Keys[k].JWKSFile = rel(j.Keys[k].File), rel(j.Keys[k].JWKSFile)
			}
		}
		if a.APIKeys != nil {
			a.APIKeys.Name = name
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		r.MaxBodyBytes = cmp.Or(r.MaxBodyBytes, c.MaxBodyBytes)
		if g := r.GRPC; g != nil {
			g.DescriptorSet = rel(g.DescriptorSet)
			r.Upstreams = []string{g.Upstream}
		}
	}
}

// relativeTo resolves a relative path against dir.
func relativeTo(dir string) func(string) string {
	return func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
}

// parseEntry reads a descriptor entry: a fact ("user_id", "header:X-Tenant")
// or a literal ("generic_key=global").
func parseEntry(s string) (entry, error) {
	if k, v, ok := strings.Cut(s, "="); ok {
		if k == "" || v == "" {
			return entry{}, fmt.Errorf("%q: a literal entry is key=value", s)
		}
		return entry{key: k, value: v}, nil
	}
	if name, ok := strings.CutPrefix(s, "header:"); ok {
		if name == "" {
			return entry{}, errors.New("header: needs a header name, as header:X-Tenant")
		}
		return entry{key: strings.ToLower(name), fact: s}, nil
	}
	if name, ok := strings.CutPrefix(s, "attribute:"); ok {
		if name == "" {
			return entry{}, errors.New("attribute: needs an attribute's name, as attribute:time_zone")
		}
		return entry{key: name, fact: s}, nil
	}
	if !slices.Contains(Facts, s) {
		return entry{}, fmt.Errorf("%q is not a fact (%s, header:<Name>, attribute:<name>) nor a key=value literal", s, strings.Join(Facts, ", "))
	}
	return entry{key: s, fact: s}, nil
}

// routeName is how problems name the i-th route.
func routeName(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("routes[%d]", i)
	}
	return fmt.Sprintf("routes[%d] (%s)", i, name)
}

// mappingLines records in lines the line of every mapping under n, by
// its YAML path, named as yamlconf names paths ("routes[1].health_check").
func mappingLines(n *yaml.Node, path string, lines map[string]int) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		lines[path] = n.Line
		for i := 0; i+1 < len(n.Content); i += 2 {
			mappingLines(n.Content[i+1], joinPath(path, n.Content[i].Value), lines)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			mappingLines(e, fmt.Sprintf("%s[%d]", path, i), lines)
		}
	}
}

// line is the line of the innermost mapping of the file that holds path;
// 0 for a Config made in Go.
func (c *Config) line(path string) int {
	for c.lines != nil {
		if l, ok := c.lines[path]; ok || path == "" {
			return l
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
	return 0
}

// yamlPath is the YAML path of sel, a Go selector ("Keys[1].Algorithms",
// "Health.Path") from a value of type t: each field by its yaml name. It
// stops at a field the file does not have (a package's own).
func yamlPath(t reflect.Type, sel string) (path string) {
	for {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var part string
		if part, sel = nextPart(sel); part == "" {
			return path
		}
		switch {
		case part[0] == '[' && t.Kind() == reflect.Slice:
			path, t = path+part, t.Elem()
		case part[0] != '[' && t.Kind() == reflect.Struct:
			f, ok := t.FieldByName(part)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !ok || name == "" || name == "-" {
				return path
			}
			path, t = joinPath(path, name), f.Type
		default:
			return path
		}
	}
}

// nextPart splits sel's first part off: a field name or an index "[1]".
func nextPart(sel string) (part, rest string) {
	sel = strings.TrimPrefix(sel, ".")
	if strings.HasPrefix(sel, "[") {
		if i := strings.IndexByte(sel, ']'); i > 0 {
			return sel[:i+1], sel[i+1:]
		}
		return "", ""
	}
	if i := strings.IndexAny(sel, ".["); i >= 0 {
		return sel[:i], sel[i:]
	}
	return sel, ""
}

func joinPath(path, field string) string {
	if path == "" || field == "" {
		return path + field
	}
	return path + "." + field
}
