package header

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// This file parses structured-field lists (RFC 9651, section 4.2), the
// form of both IETF rate-limit fields. Every bare item type is parsed,
// since a field may carry a parameter of any type that this package then
// ignores; inner lists are parsed and returned marked, so that a caller
// can skip them.

type kind uint8

const (
	kindInteger kind = iota + 1
	kindDecimal
	kindString
	kindToken
	kindBytes
	kindBoolean
	kindDate
	kindDisplay
)

// bareItem is a parsed bare item. A decimal keeps no value: no field
// read here uses one.
type bareItem struct {
	kind kind
	n    int64  // integer, date; 1 or 0 for a boolean
	s    string // string, token, display string
	b    []byte // byte sequence
}

type param struct {
	key   string
	value bareItem
}

// member is a member of a list: an item, or an inner list (inner true,
// item unset) with its parameters.
type member struct {
	item   bareItem
	inner  bool
	params []param
}

// parseList parses the field lines of one field as one list: the lines
// are joined with commas, as RFC 9651 combines them, after empty lines
// are dropped. It reports false if the field is not a valid list, which
// the caller then ignores whole.
func parseList(lines []string) ([]member, bool) {
	var s string
	switch len(lines) {
	case 0:
	case 1:
		s = strings.Trim(lines[0], " \t")
	default:
		var b strings.Builder
		for _, l := range lines {
			if l = strings.Trim(l, " \t"); l == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(l)
		}
		s = b.String()
	}
	p := sfParser{s: s}
	var ms []member
	for !p.done() {
		m, ok := p.member()
		if !ok {
			return nil, false
		}
		ms = append(ms, m)
		p.skipOWS()
		if p.done() {
			break
		}
		if p.s[p.i] != ',' {
			return nil, false
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, false // a trailing comma
		}
	}
	return ms, true
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) member() (member, bool) {
	if p.peek() != '(' {
		it, ok := p.bareItem()
		if !ok {
			return member{}, false
		}
		params, ok := p.params()
		return member{item: it, params: params}, ok
	}
	p.i++
	for !p.done() {
		p.skipSP()
		if p.peek() == ')' {
			p.i++
			params, ok := p.params()
			return member{inner: true, params: params}, ok
		}
		if _, ok := p.bareItem(); !ok {
			return member{}, false
		}
		if _, ok := p.params(); !ok {
			return member{}, false
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return member{}, false
		}
	}
	return member{}, false
}

// params parses parameters; a key given twice keeps its first place and
// its last value.
func (p *sfParser) params() ([]param, bool) {
	var ps []param
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return nil, false
		}
		v := bareItem{kind: kindBoolean, n: 1}
		if p.peek() == '=' {
			p.i++
			if v, ok = p.bareItem(); !ok {
				return nil, false
			}
		}
		replaced := false
		for j := range ps {
			if ps[j].key == key {
				ps[j].value, replaced = v, true
			}
		}
		if !replaced {
			ps = append(ps, param{key, v})
		}
	}
	return ps, true
}

func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !isLower(c) && c != '*' {
		return "", false
	}
	for p.i++; !p.done(); p.i++ {
		c := p.s[p.i]
		if !isLower(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
	}
	return p.s[start:p.i], true
}

func (p *sfParser) bareItem() (bareItem, bool) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.string()
	case isAlpha(c) || c == '*':
		return p.token(), true
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case c == '@':
		p.i++
		it, ok := p.number()
		if !ok || it.kind != kindInteger {
			return bareItem{}, false
		}
		it.kind = kindDate
		return it, true
	case c == '%':
		return p.displayString()
	}
	return bareItem{}, false
}

// number parses an integer (at most 15 digits) or a decimal (at most 12
// digits, a point, and 1 to 3 digits).
func (p *sfParser) number() (bareItem, bool) {
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	if !isDigit(p.peek()) {
		return bareItem{}, false
	}
	var n int64
	digits, frac := 0, -1 // frac counts the digits after a point, -1 if none
digits:
	for ; !p.done(); p.i++ {
		c := p.s[p.i]
		switch {
		case isDigit(c) && frac >= 0:
			if frac++; frac > 3 {
				return bareItem{}, false
			}
		case isDigit(c):
			if digits++; digits > 15 {
				return bareItem{}, false
			}
			n = n*10 + int64(c-'0')
		case c == '.' && frac < 0:
			if digits > 12 {
				return bareItem{}, false
			}
			frac = 0
		default:
			break digits
		}
	}
	if frac == 0 {
		return bareItem{}, false // a point with no digit after it
	}
	if neg {
		n = -n
	}
	if frac > 0 {
		return bareItem{kind: kindDecimal}, true
	}
	return bareItem{kind: kindInteger, n: n}, true
}

func (p *sfParser) string() (bareItem, bool) {
	p.i++
	start := p.i
	var b []byte // only once an escape is met
	for !p.done() {
		c := p.s[p.i]
		switch {
		case c == '\\':
			if b == nil {
				b = append(make([]byte, 0, 2*(p.i-start)+8), p.s[start:p.i]...)
			}
			p.i++
			if c = p.peek(); c != '"' && c != '\\' {
				return bareItem{}, false
			}
			b = append(b, c)
		case c == '"':
			p.i++
			if b == nil {
				return bareItem{kind: kindString, s: p.s[start : p.i-1]}, true
			}
			return bareItem{kind: kindString, s: string(b)}, true
		case c < 0x20 || c > 0x7e:
			return bareItem{}, false
		case b != nil:
			b = append(b, c)
		}
		p.i++
	}
	return bareItem{}, false
}

func (p *sfParser) token() bareItem {
	start := p.i
	for p.i++; !p.done(); p.i++ {
		if c := p.s[p.i]; !isTchar(c) && c != ':' && c != '/' {
			break
		}
	}
	return bareItem{kind: kindToken, s: p.s[start:p.i]}
}

// bytes parses a byte sequence. As RFC 9651 asks, it accepts base64
// without its padding and with non-zero pad bits.
func (p *sfParser) bytes() (bareItem, bool) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return bareItem{}, false
	}
	enc := p.s[p.i : p.i+end]
	p.i += end + 1
	for i := range len(enc) {
		if c := enc[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return bareItem{}, false
		}
	}
	dec := base64.RawStdEncoding
	if strings.HasSuffix(enc, "=") {
		dec = base64.StdEncoding
	}
	b, err := dec.DecodeString(enc)
	if err != nil {
		return bareItem{}, false
	}
	return bareItem{kind: kindBytes, b: b}, true
}

func (p *sfParser) boolean() (bareItem, bool) {
	p.i++
	switch p.peek() {
	case '1':
		p.i++
		return bareItem{kind: kindBoolean, n: 1}, true
	case '0':
		p.i++
		return bareItem{kind: kindBoolean}, true
	}
	return bareItem{}, false
}

func (p *sfParser) displayString() (bareItem, bool) {
	p.i++
	if p.peek() != '"' {
		return bareItem{}, false
	}
	p.i++
	var b []byte
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c < 0x20 || c > 0x7e:
			return bareItem{}, false
		case c == '%':
			if p.i+2 > len(p.s) {
				return bareItem{}, false
			}
			hi, ok1 := lowerHex(p.s[p.i])
			lo, ok2 := lowerHex(p.s[p.i+1])
			if !ok1 || !ok2 {
				return bareItem{}, false
			}
			b = append(b, hi<<4|lo)
			p.i += 2
		case c == '"':
			if !utf8.Valid(b) {
				return bareItem{}, false
			}
			return bareItem{kind: kindDisplay, s: string(b)}, true
		default:
			b = append(b, c)
		}
	}
	return bareItem{}, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || 'A' <= c && c <= 'Z' }

// isTchar reports whether c may be in a token (RFC 9110, section 5.6.2).
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
