// Package urlpath gives a request path its one canonical form: the form
// that the gateway routes on, keys limits by, logs and sends upstream, and
// that the middleware keys limits by, so that no spelling of a path is
// counted apart from another the server cannot tell from it.
package urlpath

import (
	"errors"
	"strings"
)

// Errors of Canonical: a path that some servers read in a way the
// canonical form cannot stand for. The gateway refuses them (400); the
// middleware, which sits in front of one known handler, keys by the form
// returned alongside.
var (
	ErrNotAbsolute   = errors.New("the path does not start with /")
	ErrBadEscape     = errors.New("the path has a malformed percent-encoding")
	ErrControl       = errors.New("the path has a control character (such as %00)")
	ErrBackslash     = errors.New("the path has a backslash, which some servers read as /")
	ErrDoubleEncoded = errors.New("the path is percent-encoded twice (%25 before two hex digits)")
	ErrDotParams     = errors.New("the path has a dot segment with parameters (..;), which some servers read as ..")
	ErrDotSlash      = errors.New("the path has an encoded slash beside a dot segment (..%2F), which some servers read as ..")
)

// Canonical returns the canonical form of escaped, a request's path as
// sent (URL.EscapedPath):
//
//   - "." and ".." segments are resolved and empty segments ("//")
//     dropped, as path.Clean does; a trailing "/" is kept;
//   - a percent-encoded unreserved character (A-Z a-z 0-9 - . _ ~) is
//     decoded, every other percent-encoding is kept with upper-case hex
//     digits (so %2F stays an encoded slash inside its segment, and %3B
//     stays apart from a literal ';'), and a byte a path segment cannot
//     hold literally is encoded (RFC 3986, section 6.2.2).
//
// Two paths with the same canonical form are the same to any server that
// follows RFC 3986. Canonical is idempotent, and returns escaped itself,
// without allocating, when it is canonical already.
//
// The error reports a path that servers read in ways the canonical form
// cannot stand for: a control character or NUL, a backslash, a double
// encoding, a dot segment with parameters (Tomcat reads "..;" as ".."), an
// encoded slash beside a dot segment. The canonical form is returned with
// it all the same (for ErrNotAbsolute and ErrBadEscape, escaped as it
// is), for a caller that keys by it rather than refusing.
func Canonical(escaped string) (string, error) {
	if escaped == "" || escaped[0] != '/' {
		return escaped, ErrNotAbsolute
	}
	if isCanonical(escaped) {
		return escaped, nil
	}
	return canonicalize(escaped)
}

// isCanonical reports whether p needs no change and holds nothing to
// refuse: literal path characters only, no empty segment but a final
// one, no dot segment.
func isCanonical(p string) bool {
	start := 1 // of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c != '/' {
				if !literal[c] {
					return false
				}
				continue
			}
		}
		seg := p[start:i]
		switch {
		case seg == "" && i < len(p), seg == "." || seg == "..":
			return false
		case len(seg) > 1 && seg[0] == '.' && (seg[1] == ';' || seg[1] == '.' && len(seg) > 2 && seg[2] == ';'):
			return false
		}
		start = i + 1
	}
	return true
}

// canonicalize is Canonical's slow path.
func canonicalize(p string) (string, error) {
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	var out []string // the canonical segments
	for seg := range strings.SplitSeq(p[1:], "/") {
		canon, decoded, err := segment(seg)
		if err != nil {
			return p, err
		}
		if strings.ContainsAny(decoded, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") {
			fail(ErrControl)
		}
		if strings.IndexByte(decoded, '\\') >= 0 {
			fail(ErrBackslash)
		}
		if doubleEncoded(decoded) {
			fail(ErrDoubleEncoded)
		}
		if before, _, ok := strings.Cut(decoded, ";"); ok && (before == "." || before == "..") {
			fail(ErrDotParams)
		}
		if strings.IndexByte(decoded, '/') >= 0 {
			for part := range strings.SplitSeq(decoded, "/") {
				if part == "." || part == ".." {
					fail(ErrDotSlash)
				}
			}
		}
		switch canon {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, canon)
		}
	}
	if len(out) > 0 && p[len(p)-1] == '/' {
		out = append(out, "") // the trailing slash
	}
	if len(out) == 0 {
		return "/", firstErr
	}
	return "/" + strings.Join(out, "/"), firstErr
}

// segment returns the canonical form of one segment and its fully
// decoded bytes.
func segment(s string) (canon, decoded string, err error) {
	var c, d strings.Builder
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b == '%' {
			var ok bool
			if b, ok = PercentByte(s, i); !ok {
				return "", "", ErrBadEscape
			}
			i += 2
			d.WriteByte(b)
			if unreserved(b) {
				c.WriteByte(b)
			} else {
				writeEscaped(&c, b)
			}
			continue
		}
		d.WriteByte(b)
		if literal[b] {
			c.WriteByte(b)
		} else {
			writeEscaped(&c, b)
		}
	}
	return c.String(), d.String(), nil
}

// doubleEncoded reports whether decoded still holds a percent-encoding.
func doubleEncoded(decoded string) bool {
	for i := 0; i+2 < len(decoded); i++ {
		if _, ok := PercentByte(decoded, i); decoded[i] == '%' && ok {
			return true
		}
	}
	return false
}

// Decode returns the bytes a canonical path stands for, as URL.Path
// holds them: every percent-encoding decoded.
func Decode(canonical string) string {
	if strings.IndexByte(canonical, '%') < 0 {
		return canonical
	}
	b := make([]byte, 0, len(canonical))
	for i := 0; i < len(canonical); i++ {
		c := canonical[i]
		if d, ok := PercentByte(canonical, i); c == '%' && ok {
			c = d
			i += 2
		}
		b = append(b, c)
	}
	return string(b)
}

// HasPrefix reports whether the canonical path p is prefix or lies below
// it, on whole segments: "/api" covers /api, /api/ and /api/v1, not
// /apiary; "/api/" covers /api/ and /api/v1, not /api.
func HasPrefix(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || strings.HasSuffix(prefix, "/") || p[len(prefix)] == '/'
}

// literal holds the bytes a canonical segment holds as themselves: RFC
// 3986's pchar less pct-encoded (unreserved, sub-delims, ':' and '@').
var literal = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@") {
		t[c] = true
	}
	return t
}()

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func writeEscaped(b *strings.Builder, c byte) {
	const hexDigits = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&15])
}

// PercentByte returns the byte that the percent-encoding at s[i:] ("%XY",
// where s[i] is '%') stands for, and false if two hex digits do not
// follow s[i].
func PercentByte(s string, i int) (byte, bool) {
	if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
		return 0, false
	}
	return unhex(s[i+1])<<4 | unhex(s[i+2]), true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
