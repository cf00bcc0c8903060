package transcode

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/bouncerhq/bouncer/internal/urlpath"
)

// A template is a parsed google.api.http path template:
//
//	Template = "/" Segments [ Verb ] ;
//	Segments = Segment { "/" Segment } ;
//	Segment  = "*" | "**" | LITERAL | Variable ;
//	Variable = "{" FieldPath [ "=" Segments ] "}" ;
//	FieldPath = IDENT { "." IDENT } ;
//	Verb     = ":" LITERAL ;
//
// "**" may only be the last segment. {var} is short for {var=*}.
type template struct {
	segs []segment
	vars []variable
	verb string // decoded; "" when the template has none
}

type segKind uint8

// The kinds are ranked from the most specific to the least, the order in
// which routes are tried.
const (
	segLiteral segKind = iota
	segStar            // "*": one non-empty segment
	segDouble          // "**": zero or more segments, only last
)

type segment struct {
	kind segKind
	lit  string // decoded, for segLiteral
	raw  string // as written, for segLiteral
}

// A variable binds the path segments segs[start:end] to a field.
type variable struct {
	field      []string // the field path, split at its dots
	start, end int
}

// multi reports whether v takes the multi-segment form of decoding, in
// which %2F stays encoded: it covers more than one segment or "**".
func (t *template) multi(v variable) bool {
	return v.end-v.start != 1 || t.segs[v.start].kind == segDouble
}

// String returns the template in its canonical form; parseTemplate of it
// gives back an equal template.
func (t *template) String() string {
	var b strings.Builder
	next := 0 // the next variable to open
	for i, s := range t.segs {
		b.WriteByte('/')
		if next < len(t.vars) && t.vars[next].start == i {
			b.WriteByte('{')
			b.WriteString(strings.Join(t.vars[next].field, "."))
			b.WriteByte('=')
		}
		switch s.kind {
		case segLiteral:
			b.WriteString(s.raw)
		case segStar:
			b.WriteByte('*')
		case segDouble:
			b.WriteString("**")
		}
		if next < len(t.vars) && t.vars[next].end == i+1 {
			b.WriteByte('}')
			next++
		}
	}
	if t.verb != "" {
		b.WriteByte(':')
		b.WriteString(escapeLiteral(t.verb))
	}
	return b.String()
}

// shape is the template without its variables' names: two templates of
// one shape match the same paths.
func (t *template) shape() string {
	var b strings.Builder
	for _, s := range t.segs {
		b.WriteByte('/')
		switch s.kind {
		case segLiteral:
			b.WriteString(escapeLiteral(s.lit))
		case segStar:
			b.WriteByte('*')
		case segDouble:
			b.WriteString("**")
		}
	}
	if t.verb != "" {
		b.WriteByte(':')
		b.WriteString(escapeLiteral(t.verb))
	}
	return b.String()
}

// before reports whether t is tried before u: a template with a verb
// first, then segment by segment the more specific kind.
func (t *template) before(u *template) bool {
	if (t.verb != "") != (u.verb != "") {
		return t.verb != ""
	}
	for i := 0; i < len(t.segs) && i < len(u.segs); i++ {
		if t.segs[i].kind != u.segs[i].kind {
			return t.segs[i].kind < u.segs[i].kind
		}
	}
	// Templates of different lengths match one path only when the longer
	// ends in "**", where the shorter is exact.
	return len(t.segs) < len(u.segs)
}

// match matches the segments of an escaped path, split at its slashes
// after the leading one, and returns the decoded values of t's
// variables. A value that does not decode is an error; a path that does
// not match is ok == false.
func (t *template) match(path []string) (values []string, ok bool, err error) {
	if t.verb != "" {
		last := path[len(path)-1]
		i := strings.LastIndexByte(last, ':')
		if i < 0 {
			return nil, false, nil
		}
		if verb, err := url.PathUnescape(last[i+1:]); err != nil || verb != t.verb {
			return nil, false, nil
		}
		path = append(path[:len(path)-1:len(path)-1], last[:i])
	}
	n := len(t.segs)
	if t.segs[n-1].kind == segDouble {
		if len(path) < n-1 {
			return nil, false, nil
		}
	} else if len(path) != n {
		return nil, false, nil
	}
	for i, s := range t.segs {
		switch s.kind {
		case segLiteral:
			if d, err := url.PathUnescape(path[i]); err != nil || d != s.lit {
				return nil, false, nil
			}
		case segStar:
			if path[i] == "" {
				return nil, false, nil
			}
		}
	}
	values = make([]string, len(t.vars))
	for j, v := range t.vars {
		end := v.end
		if end == n && t.segs[n-1].kind == segDouble {
			end = len(path)
		}
		var err error
		if t.multi(v) {
			values[j], err = unescapeMulti(strings.Join(path[v.start:end], "/"))
		} else {
			values[j], err = url.PathUnescape(path[v.start])
		}
		if err != nil {
			return nil, false, fmt.Errorf("path variable %s: %w", strings.Join(v.field, "."), err)
		}
	}
	return values, true, nil
}

// splitPath splits an escaped path at its slashes after the leading one;
// nil if it has none.
func splitPath(p string) []string {
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// unescapeMulti decodes the value of a multi-segment variable: every
// percent-encoded byte but %2F, which stays as it is.
func unescapeMulti(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		c, ok := urlpath.PercentByte(s, i)
		if !ok {
			return "", url.EscapeError(s[i:min(i+3, len(s))])
		}
		if c == '/' {
			b.WriteString(s[i : i+3])
		} else {
			b.WriteByte(c)
		}
		i += 2
	}
	return b.String(), nil
}

// parseTemplate parses a path template of the grammar on template.
func parseTemplate(s string) (*template, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, errors.New("path template must start with /")
	}
	p := &parser{s: s, i: 1, t: &template{}}
	if err := p.segments(); err != nil {
		return nil, err
	}
	if p.i < len(s) && s[p.i] == ':' {
		p.i++
		verb, err := p.literal()
		if err != nil {
			return nil, fmt.Errorf("verb: %w", err)
		}
		p.t.verb = verb
	}
	if p.i != len(s) {
		return nil, fmt.Errorf("unexpected %q at offset %d", s[p.i], p.i)
	}
	t := p.t
	for i, seg := range t.segs {
		if seg.kind == segDouble && i != len(t.segs)-1 {
			return nil, errors.New(`"**" must be the last segment`)
		}
	}
	seen := make(map[string]bool, len(t.vars))
	for _, v := range t.vars {
		name := strings.Join(v.field, ".")
		if seen[name] {
			return nil, fmt.Errorf("variable %s bound twice", name)
		}
		seen[name] = true
	}
	return t, nil
}

type parser struct {
	s     string
	i     int
	t     *template
	inVar bool
}

func (p *parser) segments() error {
	for {
		if err := p.segment(); err != nil {
			return err
		}
		if p.i == len(p.s) || p.s[p.i] != '/' {
			return nil
		}
		p.i++
	}
}

func (p *parser) segment() error {
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "**"):
		p.i += 2
		p.t.segs = append(p.t.segs, segment{kind: segDouble})
	case strings.HasPrefix(rest, "*"):
		p.i++
		p.t.segs = append(p.t.segs, segment{kind: segStar})
	case strings.HasPrefix(rest, "{"):
		return p.variable()
	default:
		start := p.i
		lit, err := p.literal()
		if err != nil {
			return err
		}
		p.t.segs = append(p.t.segs, segment{kind: segLiteral, lit: lit, raw: p.s[start:p.i]})
	}
	return nil
}

func (p *parser) variable() error {
	if p.inVar {
		return fmt.Errorf("nested variable at offset %d", p.i)
	}
	p.i++ // "{"
	field, err := p.fieldPath()
	if err != nil {
		return err
	}
	v := variable{field: field, start: len(p.t.segs)}
	if p.i < len(p.s) && p.s[p.i] == '=' {
		p.i++
		p.inVar = true
		err := p.segments()
		p.inVar = false
		if err != nil {
			return err
		}
	} else {
		p.t.segs = append(p.t.segs, segment{kind: segStar})
	}
	if p.i == len(p.s) || p.s[p.i] != '}' {
		return fmt.Errorf("variable %s: missing } at offset %d", strings.Join(field, "."), p.i)
	}
	p.i++
	v.end = len(p.t.segs)
	p.t.vars = append(p.t.vars, v)
	return nil
}

func (p *parser) fieldPath() ([]string, error) {
	var path []string
	for {
		start := p.i
		for p.i < len(p.s) && isIdent(p.s[p.i], p.i == start) {
			p.i++
		}
		if p.i == start {
			return nil, fmt.Errorf("expected a field name at offset %d", p.i)
		}
		path = append(path, p.s[start:p.i])
		if p.i == len(p.s) || p.s[p.i] != '.' {
			return path, nil
		}
		p.i++
	}
}

// literal reads a non-empty LITERAL and returns it decoded.
func (p *parser) literal() (string, error) {
	start := p.i
	for p.i < len(p.s) && isLiteral(p.s[p.i]) {
		if _, ok := urlpath.PercentByte(p.s, p.i); p.s[p.i] == '%' && !ok {
			return "", fmt.Errorf("bad percent-encoding at offset %d", p.i)
		}
		p.i++
	}
	if p.i == start {
		return "", fmt.Errorf("empty segment at offset %d", p.i)
	}
	return url.PathUnescape(p.s[start:p.i])
}

// isLiteral reports whether c may appear in a LITERAL: RFC 3986's pchar
// without the ":" of the verb and the "*" and "=" of the template syntax.
func isLiteral(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()+,;@%", c) >= 0
}

// escapeLiteral writes s as a LITERAL that decodes back to s.
func escapeLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; isLiteral(c) && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func isIdent(c byte, first bool) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || !first && '0' <= c && c <= '9'
}
