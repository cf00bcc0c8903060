package transcode

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"
)

// hopByHop are the headers of one HTTP connection (RFC 9110, 7.6.1),
// never forwarded, lower-cased.
var hopByHop = map[string]bool{
	"connection":          true,
	"keep-alive":          true,
	"proxy-authenticate":  true,
	"proxy-authorization": true,
	"proxy-connection":    true,
	"te":                  true,
	"trailer":             true,
	"transfer-encoding":   true,
	"upgrade":             true,
}

// forwarded reports whether the header named by the lower-cased key goes
// upstream as metadata: Authorization, X-Request-Id and the gateway's
// X-Bouncer-* identity headers.
func forwarded(key string) bool {
	return key == "authorization" || key == "x-request-id" || strings.HasPrefix(key, "x-bouncer-")
}

// outgoingMetadata is the metadata a request's headers carry upstream,
// under lower-cased keys. A forwarded header that gRPC cannot carry (a
// key outside [0-9a-z-_.], a value outside printable ASCII) is an error,
// rather than a call that goes without it.
func outgoingMetadata(h http.Header) (metadata.MD, error) {
	md := metadata.MD{}
	for name, values := range h {
		key := strings.ToLower(name)
		if !forwarded(key) || hopByHop[key] || listedInConnection(h, key) {
			continue
		}
		if !validKey(key) {
			return nil, fmt.Errorf("header %q cannot be sent as gRPC metadata", name)
		}
		for _, v := range values {
			if !strings.HasSuffix(key, "-bin") && !printable(v) {
				return nil, fmt.Errorf("header %q has a value gRPC metadata cannot carry", name)
			}
		}
		md[key] = append(md[key], values...)
	}
	return md, nil
}

// listedInConnection reports whether the Connection header names key,
// which makes it hop-by-hop.
func listedInConnection(h http.Header, key string) bool {
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), key) {
				return true
			}
		}
	}
	return false
}

// setResponseMetadata writes the response header metadata of a call as
// Grpc-Metadata-<key> headers; binary (-bin) values in base64. gRPC's
// own keys (content-type, grpc-*) and keys HTTP cannot name stay behind.
func setResponseMetadata(h http.Header, md metadata.MD) {
	for key, values := range md {
		if key == "content-type" || strings.HasPrefix(key, "grpc-") || !validKey(key) {
			continue
		}
		for _, v := range values {
			if strings.HasSuffix(key, "-bin") {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			}
			h.Add("Grpc-Metadata-"+key, v)
		}
	}
}

func validKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return k != ""
}

func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
