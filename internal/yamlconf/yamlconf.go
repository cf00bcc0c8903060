// Package yamlconf decodes configuration YAML strictly, with the line of
// every problem: an unknown field, a wrong type or a bad duration is
// reported at its line, and decoding goes on so that one pass reports
// every such problem. The rules config and the gateway config share it.
package yamlconf

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Pos is the line of the YAML node a config value came from, so that
// errors found after decoding still name it. A struct field of type Pos
// (exported so that reflection may set it) is filled with the struct's own
// line when untagged, and with the line of the key it names when tagged
// `yamlconf:"key"` (0 when the key is absent).
type Pos struct{ Line int }

var (
	posType      = reflect.TypeFor[Pos]()
	durationType = reflect.TypeFor[time.Duration]()
	nodeType     = reflect.TypeFor[yaml.Node]()
)

// Decoder decodes YAML nodes into a config's raw structs strictly: an
// unknown field, a wrong type or a bad duration is an error at its line,
// given to Report, and decoding goes on so that one pass reports every
// such error. A struct's fields are those with a yaml tag, and those of
// an embedded struct tagged `yaml:",inline"` (one level deep), so that a
// config can hold another package's type as its own fields.
type Decoder struct {
	File   string
	Report func(file string, line int, reason string)

	// Unknown, if not nil, returns the reason given for an unknown field
	// (path is "" at the top level) in place of UnknownReason's.
	Unknown func(path, field string, known []string) string

	visits  int // nodes decoded, aliases counted each time they are used
	tooMany bool
}

// MaxNodes bounds the nodes one file decodes to, aliases expanded: a few
// lines of nested aliases can otherwise stand for billions of nodes.
const MaxNodes = 1 << 17

func (d *Decoder) errorf(line int, format string, args ...any) {
	d.Report(d.File, line, fmt.Sprintf(format, args...))
}

// Decode fills v (a pointer) from n.
func (d *Decoder) Decode(n *yaml.Node, v any) {
	d.value(n, reflect.ValueOf(v).Elem(), "")
}

// visit counts n, and reports false once the file has expanded to more
// than MaxNodes values (saying so once).
func (d *Decoder) visit(n *yaml.Node, path string) bool {
	if d.visits++; d.visits > MaxNodes {
		if !d.tooMany {
			d.tooMany = true
			d.errorf(n.Line, "%s: the file expands to more than %d values (nested aliases?)", name(path), MaxNodes)
		}
		return false
	}
	return true
}

func (d *Decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if !d.visit(n, path) {
		return
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value keeps the zero value, as an absent one
	}
	switch {
	case v.Type() == nodeType:
		v.Set(reflect.ValueOf(*n))
	case v.Type() == durationType:
		d.duration(n, v, path)
	case v.Kind() == reflect.Interface:
		if f := d.freeForm(n, path); f != nil {
			v.Set(reflect.ValueOf(f))
		}
	case v.Kind() == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.value(n, p.Elem(), path)
		v.Set(p)
	case v.Kind() == reflect.Struct:
		d.fields(n, v, path)
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n.Line, "%s: want a list, got %s", name(path), describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.value(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case v.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n.Line, "%s: want a mapping, got %s", name(path), describe(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, e := n.Content[i], n.Content[i+1]
			key := reflect.ValueOf(k.Value)
			if m.MapIndex(key).IsValid() {
				d.errorf(k.Line, "%s: duplicate key %q", name(path), k.Value)
				continue
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			d.value(e, ev, join(path, k.Value))
			m.SetMapIndex(key, ev)
		}
		v.Set(m)
	default:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n.Line, "%s: want a %s, got %s", name(path), kindName(v.Kind()), describe(n))
			return
		}
		if kindName(v.Kind()) == "whole number" && n.ShortTag() == "!!float" {
			// yaml.v3 would truncate 10.5 to 10.
			d.errorf(n.Line, "%s: want a whole number, got %s", name(path), n.Value)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.errorf(n.Line, "%s: want a %s, got %q", name(path), kindName(v.Kind()), n.Value)
		}
	}
}

// freeForm reads a value of any shape (an interface field, such as a
// descriptor's metadata): nil, a string, bool, int, uint64 or float64, or
// a []any or map[string]any of them, keys as written. It reads scalars as
// envoyproxy/ratelimit's YAML 1.1 reader does where that differs from
// YAML 1.2: a timestamp stays the string it is written as, and an
// unquoted yes, no, on, off, y or n (in any of their cases) is a boolean.
func (d *Decoder) freeForm(n *yaml.Node, path string) any {
	if !d.visit(n, path) {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, e := n.Content[i], n.Content[i+1]
			if _, dup := m[k.Value]; dup {
				d.errorf(k.Line, "%s: duplicate key %q", name(path), k.Value)
				continue
			}
			m[k.Value] = d.freeForm(e, join(path, k.Value))
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, e := range n.Content {
			l[i] = d.freeForm(e, fmt.Sprintf("%s[%d]", path, i))
		}
		return l
	}
	if n.ShortTag() == "!!timestamp" {
		return n.Value
	}
	if b, ok := yaml11Bools[n.Value]; ok && n.ShortTag() == "!!str" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		return b
	}
	var v any
	if err := n.Decode(&v); err != nil {
		d.errorf(n.Line, "%s: %v", name(path), err)
	}
	return v
}

// yaml11Bools are YAML 1.1's booleans that YAML 1.2 reads as strings.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

func (d *Decoder) fields(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "%s: want a mapping, got %s", name(path), describe(n))
		return
	}
	var known []string
	index := map[string][]int{}
	keyPos := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == posType {
			if k := f.Tag.Get("yamlconf"); k != "" {
				keyPos[k] = i
				continue
			}
			v.Field(i).Set(reflect.ValueOf(Pos{n.Line}))
			continue
		}
		tag, opt, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.Anonymous && f.Type.Kind() == reflect.Struct && opt == "inline" {
			// An embedded struct tagged `yaml:",inline"`: its fields
			// are this mapping's.
			for j := range f.Type.NumField() {
				if tag, _, _ := strings.Cut(f.Type.Field(j).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
					known = append(known, tag)
					index[tag] = []int{i, j}
				}
			}
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		known = append(known, tag)
		index[tag] = []int{i}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, e := n.Content[i], n.Content[i+1]
		fi, ok := index[k.Value]
		if !ok {
			reason := UnknownReason(k.Value, known)
			if d.Unknown != nil {
				reason = d.Unknown(path, k.Value, known)
			}
			d.errorf(k.Line, "%s: %s", name(path), reason)
			continue
		}
		if pi, ok := keyPos[k.Value]; ok {
			v.Field(pi).Set(reflect.ValueOf(Pos{k.Line}))
		}
		if seen[k.Value] {
			d.errorf(k.Line, "%s: field %q given twice", name(path), k.Value)
			continue
		}
		seen[k.Value] = true
		d.value(e, v.FieldByIndex(fi), join(path, k.Value))
	}
}

// UnknownReason says that field is not one of known, suggesting the near
// name if there is one, else listing them: `unknown field "brust" (did
// you mean burst?)`.
func UnknownReason(field string, known []string) string {
	if s := Suggest(field, known); s != "" {
		return fmt.Sprintf("unknown field %q (did you mean %s?)", field, s)
	}
	known = slices.Sorted(slices.Values(known))
	return fmt.Sprintf("unknown field %q (known: %s)", field, strings.Join(known, ", "))
}

func (d *Decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, "%s: want a duration such as 1s, 90s, 1h or 7d, got %s", name(path), describe(n))
		return
	}
	p, err := ParseDuration(n.Value)
	if err != nil {
		d.errorf(n.Line, "%s: %v", name(path), err)
		return
	}
	v.SetInt(int64(p))
}

// ParseDuration reads a Go duration ("1s", "1m30s", "250ms"), also taking
// whole days as "7d", since periods of days are common in rate limits.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && fmt.Sprint(n) == days && n > 0 && n <= 106751 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	p, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want a duration such as 1s, 90s, 1h or 7d", s)
	}
	return p, nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func name(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint32, reflect.Uint64:
		return "whole number"
	}
	return k.String()
}

// Problem is one thing wrong with a config file: where and why.
type Problem struct {
	File   string
	Line   int // 0 when the problem is not on one line
	Reason string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Reason)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Reason)
}

// Problems collects the problems of a config; Add is a Decoder's Report.
type Problems struct{ List []Problem }

// Add records a problem.
func (l *Problems) Add(file string, line int, reason string) {
	l.List = append(l.List, Problem{File: file, Line: line, Reason: reason})
}

// Sorted returns the problems in file and line order, or nil if there
// are none.
func (l *Problems) Sorted() []Problem {
	if len(l.List) == 0 {
		return nil
	}
	slices.SortStableFunc(l.List, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return l.List
}

// Lines writes problems one per line, after title.
func Lines(title string, problems []Problem) string {
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return title + "\n" + strings.Join(lines, "\n")
}
