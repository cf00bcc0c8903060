package urlpath

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, c := range []struct {
		in, want string
		err      error
	}{
		{"/", "/", nil},
		{"/p/expensive", "/p/expensive", nil},
		{"/p//expensive", "/p/expensive", nil},
		{"/p/./expensive", "/p/expensive", nil},
		{"/p/x/../expensive", "/p/expensive", nil},
		{"/p/expensive/", "/p/expensive/", nil},
		{"/p/expensive//", "/p/expensive/", nil},
		{"//p/expensive", "/p/expensive", nil},
		{"/../../p", "/p", nil},
		{"/a/b/..", "/a", nil},
		{"/a/b/../", "/a/", nil},
		{"/a/.", "/a", nil},
		{"/a/..", "/", nil},
		{"/p/%65xpensive", "/p/expensive", nil},       // an unreserved character, decoded
		{"/p/%2e%2E/x", "/x", nil},                    // encoded dots are dots
		{"/a%2Fb/c", "/a%2Fb/c", nil},                 // an encoded slash stays in its segment
		{"/a%2fb", "/a%2Fb", nil},                     // hex digits upper-cased
		{"/a%3Bb;c", "/a%3Bb;c", nil},                 // encoded reserved characters stay apart from literal ones
		{"/caf%c3%a9", "/caf%C3%A9", nil},             // non-ASCII bytes stay encoded
		{"/caf\xc3\xa9", "/caf%C3%A9", nil},           // and are encoded when sent raw
		{"/a b", "/a%20b", nil},                       // a byte a segment cannot hold
		{"/x;jsessionid=1", "/x;jsessionid=1", nil},   // parameters on a name are kept
		{"/search/50%25off", "/search/50%25off", nil}, // a percent sign that encodes nothing twice
		{"/p/%00", "/p/%00", ErrControl},              // refused, with the canonical form
		{"/p/a%0Ab", "/p/a%0Ab", ErrControl},          // a line feed
		{"/p\\expensive", "/p%5Cexpensive", ErrBackslash},
		{"/p%5cexpensive", "/p%5Cexpensive", ErrBackslash},
		{"/p/%2565xpensive", "/p/%2565xpensive", ErrDoubleEncoded},
		{"/admin/..;/p", "/admin/..;/p", ErrDotParams},
		{"/admin/.;x/p", "/admin/.;x/p", ErrDotParams},
		{"/admin/%2e%2e;/p", "/admin/..;/p", ErrDotParams},
		{"/a/..%2Fb", "/a/..%2Fb", ErrDotSlash},
		{"/a%2F..%2Fb", "/a%2F..%2Fb", ErrDotSlash},
		{"/a%zz", "/a%zz", ErrBadEscape},
		{"a/b", "a/b", ErrNotAbsolute},
		{"", "", ErrNotAbsolute},
	} {
		got, err := Canonical(c.in)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("Canonical(%q) = %q, %v; want %q, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestHasPrefix(t *testing.T) {
	for _, c := range []struct {
		p, prefix string
		want      bool
	}{
		{"/api", "/api", true}, {"/api/", "/api", true}, {"/api/v1", "/api", true}, {"/apiary", "/api", false},
		{"/api/", "/api/", true}, {"/api/v1", "/api/", true}, {"/api", "/api/", false},
		{"/api%2Fx", "/api", false}, // an encoded slash does not end a segment
		{"/x", "/", true},
	} {
		if got := HasPrefix(c.p, c.prefix); got != c.want {
			t.Errorf("HasPrefix(%q, %q) = %v, want %v", c.p, c.prefix, got, c.want)
		}
	}
}

func TestCanonicalDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = Canonical("/api/v1/users/42/orders") }); n != 0 {
		t.Errorf("Canonical of a canonical path: %v allocations, want 0", n)
	}
}

// FuzzCanonical holds Canonical to what it promises, against a naive
// reference built on the standard library: idempotence, the fast path
// agreeing with the slow one, only canonical escapes in the output, the
// same form for spellings that RFC 3986 calls equal, and, on paths
// without an encoded slash, the same bytes as path.Clean of the decoded
// path.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"/", "/p/expensive", "/p//expensive", "/p/./x/../expensive/", "/a%2Fb", "/%2e%2e/x",
		"/caf%C3%A9", "/a b", "/x;y", "/..;/a", "/a%00", "/a\\b", "/%2565", "/a/..%2F", "/%7euser"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, p string, seed uint8) {
		if p == "" || p[0] != '/' {
			return
		}
		got, err := Canonical(p)
		if errors.Is(err, ErrBadEscape) {
			return
		}
		// Idempotent, and the fast path agrees with the slow one.
		again, err2 := Canonical(got)
		if again != got {
			t.Fatalf("Canonical(%q) = %q, but Canonical of that is %q", p, got, again)
		}
		if err == nil && err2 != nil {
			t.Fatalf("Canonical(%q) = %q, but that form is refused: %v", p, got, err2)
		}
		if slow, _ := canonicalize(got); slow != got {
			t.Fatalf("canonicalize(%q) = %q: the slow path changes a canonical path", got, slow)
		}
		checkEscapes(t, got)
		// An equivalent spelling has the same form.
		if alt := respell(p, seed); alt != p {
			if a, _ := Canonical(alt); a != got {
				t.Fatalf("Canonical(%q) = %q, but the equivalent %q gives %q", p, got, alt, a)
			}
		}
		// Without encoded slashes, the decoded form is path.Clean's.
		dec, derr := url.PathUnescape(p)
		if derr != nil || strings.Contains(strings.ToUpper(p), "%2F") {
			return
		}
		want := path.Clean(dec)
		if strings.HasSuffix(dec, "/") && want != "/" {
			want += "/"
		}
		if Decode(got) != want {
			t.Fatalf("Decode(Canonical(%q)) = %q, want %q (path.Clean of the decoded path)", p, Decode(got), want)
		}
	})
}

// checkEscapes fails unless every byte of p is literal or '/', or part of
// a percent-encoding with upper-case hex of a byte that is not unreserved.
func checkEscapes(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/' || literal[c]:
		case c == '%' && i+2 < len(p) && strings.IndexByte("0123456789ABCDEF", p[i+1]) >= 0 && strings.IndexByte("0123456789ABCDEF", p[i+2]) >= 0:
			if unreserved(unhex(p[i+1])<<4 | unhex(p[i+2])) {
				t.Fatalf("%q: %s encodes an unreserved character", p, p[i:i+3])
			}
			i += 2
		default:
			t.Fatalf("%q: byte %q at %d is neither literal nor a canonical escape", p, c, i)
		}
	}
}

// respell returns a spelling of p that RFC 3986 calls equal, chosen by
// seed: a doubled slash, a "." segment, a "x/.." detour, an unreserved
// character percent-encoded, or an escape's hex digits in lower case.
func respell(p string, seed uint8) string {
	i := strings.LastIndexByte(p, '/')
	switch seed % 5 {
	case 0:
		return p[:i] + "/" + p[i:]
	case 1:
		return p[:i] + "/." + p[i:]
	case 2:
		return p[:i] + "/x/.." + p[i:]
	case 3:
		for j := 0; j < len(p); j++ {
			if unreserved(p[j]) && p[j] != '.' && (j < 1 || p[j-1] != '%') && (j < 2 || p[j-2] != '%') {
				const hexDigits = "0123456789ABCDEF"
				return p[:j] + "%" + string(hexDigits[p[j]>>4]) + string(hexDigits[p[j]&15]) + p[j+1:]
			}
		}
	default:
		return lowerEscapes(p)
	}
	return p
}

func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

func TestPercentByte(t *testing.T) {
	tests := []struct {
		s      string
		i      int
		want   byte
		wantOK bool
	}{
		{"%2F", 0, '/', true},
		{"a%2fb", 1, '/', true},
		{"%41", 0, 'A', true},
		{"%4", 0, 0, false},
		{"%", 0, 0, false},
		{"%G1", 0, 0, false},
		{"%1g", 0, 0, false},
	}
	for _, tt := range tests {
		if got, ok := PercentByte(tt.s, tt.i); got != tt.want || ok != tt.wantOK {
			t.Errorf("PercentByte(%q, %d): got %q, %v; want %q, %v", tt.s, tt.i, got, ok, tt.want, tt.wantOK)
		}
	}
}
