package route

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// maxRequestID is the longest request ID kept from a client.
const maxRequestID = 128

// requestID returns the client's ID if it is valid, or else a new one.
func requestID(sent string) string {
	if validRequestID(sent) {
		return sent
	}
	var b [16]byte
	rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// forwarded is the RFC 7239 Forwarded header for a request from client
// (an address, IPv6 if is6; "" when unknown) to host over proto:
// for=client;host=...;proto=....
func forwarded(client string, is6 bool, host, proto string) string {
	var b strings.Builder
	b.WriteString("for=")
	switch {
	case client == "":
		b.WriteString("unknown")
	case is6: // quoted, in brackets
		b.WriteString(`"[` + client + `]"`)
	default:
		b.WriteString(client)
	}
	if host != "" {
		b.WriteString(";host=")
		writeForwardedValue(&b, host)
	}
	b.WriteString(";proto=")
	b.WriteString(proto)
	return b.String()
}

// writeForwardedValue writes v as a token if it is one, else as a
// quoted-string.
func writeForwardedValue(b *strings.Builder, v string) {
	if isToken(v) {
		b.WriteString(v)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
