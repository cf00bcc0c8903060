package clientip

import (
	"net/netip"
	"strings"
)

const (
	// maxHops bounds the hops a walk reads.
	maxHops = 64
	// maxChainBytes bounds the bytes of a chain a walk reads, from the
	// right end, so that a long element costs no more than a short one.
	maxChainBytes = 4 << 10
)

// A walker reads a chain's elements right to left, without allocating.
//
// It splits from the right end too, even for Forwarded, whose quoted
// strings may hold commas: the right end is what the trusted proxies
// wrote, and splitting from there means nothing a client writes on the
// left, an unclosed quote for one, can change how that end is read.
type walker struct {
	lines  []string
	line   int    // index of the line rest belongs to
	rest   string // the unread left part of lines[line]
	cut    bool   // whether rest was cut short by the budget
	budget int    // bytes left to read
	quoted bool   // Forwarded: commas inside quoted strings do not split
}

// next returns the address of the next non-empty element, or false when
// the chain ends, the budget is spent or the element gives no address.
func (w *walker) next() (netip.Addr, bool) {
	for {
		if w.rest == "" {
			if w.cut || w.line == 0 {
				return netip.Addr{}, false
			}
			w.line--
			w.rest = w.lines[w.line]
			if len(w.rest) > w.budget {
				w.rest, w.cut = w.rest[len(w.rest)-w.budget:], true
			}
			w.budget -= len(w.rest)
			continue
		}
		head, elem, found := cutLast(w.rest, w.quoted)
		if !found && w.cut {
			// The element crosses the budget's edge: only its end was read.
			return netip.Addr{}, false
		}
		w.rest = head
		if elem = trimOWS(elem); elem == "" {
			continue
		}
		if w.quoted {
			var ok bool
			if elem, ok = forwardedFor(elem); !ok {
				return netip.Addr{}, false
			}
		}
		return parseNode(elem)
	}
}

// cutLast splits s around its last comma, outside quoted strings when
// quoted is set; without one, elem is s and found false.
func cutLast(s string, quoted bool) (head, elem string, found bool) {
	if !quoted {
		if i := strings.LastIndexByte(s, ','); i >= 0 {
			return s[:i], s[i+1:], true
		}
		return "", s, false
	}
	in := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ',':
			if !in {
				return s[:i], s[i+1:], true
			}
		case '"':
			// A quote after an odd run of backslashes is escaped.
			n := 0
			for n < i && s[i-1-n] == '\\' {
				n++
			}
			if n%2 == 0 {
				in = !in
			}
			i -= n
		}
	}
	return "", s, false
}

// forwardedFor returns the value of the for parameter of one Forwarded
// element (pairs name=value separated by semicolons, names in any case,
// values tokens or quoted strings), unquoted. An element that is not
// well formed, or has no for parameter or two, gives false.
func forwardedFor(elem string) (string, bool) {
	var value string
	found := false
	for elem != "" {
		if elem[0] == ';' {
			elem = trimOWS(elem[1:])
			continue
		}
		eq := strings.IndexByte(elem, '=')
		if eq <= 0 || !isToken(elem[:eq]) {
			return "", false
		}
		name, rest := elem[:eq], elem[eq+1:]
		var v string
		if rest != "" && rest[0] == '"' {
			end := closingQuote(rest)
			if end < 0 {
				return "", false
			}
			// A quoted-pair is left escaped: no address holds a backslash,
			// so a for value with one fails to parse, as it should.
			v, rest = rest[1:end], trimOWS(rest[end+1:])
			if rest != "" && rest[0] != ';' {
				return "", false
			}
		} else {
			end := strings.IndexByte(rest, ';')
			if end < 0 {
				end = len(rest)
			}
			v, rest = trimOWS(rest[:end]), rest[end:]
			if v == "" || strings.ContainsAny(v, "\"\\") {
				return "", false
			}
		}
		if strings.EqualFold(name, "for") {
			if found {
				return "", false
			}
			value, found = v, true
		}
		elem = rest
	}
	return value, found
}

// closingQuote returns the index of the quote closing the quoted string
// s starts with, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// parseNode parses one hop: an IPv4 address, or an IPv6 one bracketed or
// not, with an optional port (digits, or an obfuscated "_..." port of
// RFC 7239) after an IPv4 or bracketed address. The address is unmapped
// and its zone dropped. "unknown", an obfuscated identifier and anything
// else give false.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" || s[0] == '_' || strings.EqualFold(s, "unknown") {
		return netip.Addr{}, false
	}
	host, port, v6 := s, "", false
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port, v6 = s[1:end], s[end+1:], true
		if port != "" {
			if port[0] != ':' {
				return netip.Addr{}, false
			}
			port = port[1:]
			if port == "" {
				return netip.Addr{}, false
			}
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		host, port = s[:i], s[i+1:]
		if port == "" {
			return netip.Addr{}, false
		}
	}
	if port != "" && !isPort(port) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil || v6 && a.Is4() || !v6 && port != "" && !a.Is4() {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// isPort reports whether s is a port number or an obfuscated port.
func isPort(s string) bool {
	if s[0] == '_' {
		return len(s) > 1 && isObfuscated(s[1:])
	}
	if len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

// isObfuscated reports whether s is made of RFC 7239's obfuscated
// characters: ALPHA / DIGIT / "." / "_" / "-".
func isObfuscated(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return s != ""
}

// trimOWS trims optional whitespace: spaces and tabs.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}
