// Package storekey builds store keys from client-controlled parts.
package storekey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxPart is the longest escaped part of a store key (a domain, an
// entry's key or value) kept as it is; longer parts become a digest.
const MaxPart = 128

// Join joins the parts of a key — a rule's name, the values of a
// request's descriptors — into one key string that is safe to build from
// client-controlled values:
//
//   - each part is percent-escaped: '%', ':', '#', '{', '}' and bytes
//     below 0x20 or equal to 0x7f become %XX, so no part can fake the ':'
//     separator, open or close a Redis hash tag, or carry a line break;
//   - a part whose escaped form is longer than MaxPart bytes becomes '#'
//     and the 64 hex digits of its SHA-256, so a key's length is bounded
//     by the number of its parts;
//   - distinct lists of parts give distinct keys (escaping is one to one,
//     a digest starts with the '#' no escaped part has, and SHA-256 does
//     not collide).
func Join(parts ...string) string {
	var b strings.Builder
	// The key is held as long as the state it names, in the buffer
	// grown here: a part past MaxPart takes its digest's room, never its
	// own.
	n := len(parts)
	for _, p := range parts {
		if len(p) > MaxPart {
			n += 1 + 2*sha256.Size
		} else {
			n += len(p)
		}
	}
	b.Grow(n)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		e := escapeKeyPart(p)
		if len(e) > MaxPart {
			sum := sha256.Sum256([]byte(p))
			b.WriteByte('#')
			b.WriteString(hex.EncodeToString(sum[:]))
			continue
		}
		b.WriteString(e)
	}
	return b.String()
}

func escapeKeyPart(p string) string {
	n := 0
	for i := 0; i < len(p); i++ {
		if mustEscape(p[i]) {
			n++
		}
	}
	if n == 0 {
		return p
	}
	const hexDigits = "0123456789ABCDEF"
	out := make([]byte, 0, len(p)+2*n)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if mustEscape(c) {
			out = append(out, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		out = append(out, c)
	}
	return string(out)
}

func mustEscape(c byte) bool {
	switch c {
	case '%', ':', '#', '{', '}':
		return true
	}
	return c < 0x20 || c == 0x7f
}
