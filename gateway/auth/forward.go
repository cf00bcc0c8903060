package auth

import (
	"net/http"
	"strings"
)

// DefaultForwardPrefix is the prefix ForwardHeaders uses when it is given
// "".
const DefaultForwardPrefix = "X-Bouncer-"

// ForwardHeaders prepares h, the headers of a request about to be sent
// upstream, to say who the caller is. It first deletes every header whose
// name starts with prefix (DefaultForwardPrefix if ""), compared without
// regard to case, because those came from the client and the upstream
// must be able to trust whatever carries the prefix. It then sets
// prefix+"Subject", prefix+"Plan" and prefix+"Auth-Method" to id's
// Subject, Plan and Method, each only when it is not empty: the zero
// Identity (an anonymous request) only deletes.
//
// The Identities this package's Authenticators return hold no control
// characters in those fields, so each can be sent as a header value.
func ForwardHeaders(h http.Header, id Identity, prefix string) {
	if prefix == "" {
		prefix = DefaultForwardPrefix
	}
	for name := range h {
		if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
			delete(h, name)
		}
	}
	names := defaultForwardNames
	if prefix != DefaultForwardPrefix {
		names = [3]string{prefix + "Subject", prefix + "Plan", prefix + "Auth-Method"}
	}
	for i, v := range [3]string{id.Subject, id.Plan, id.Method} {
		if v != "" {
			h.Set(names[i], v)
		}
	}
}

// defaultForwardNames are the headers ForwardHeaders sets under
// DefaultForwardPrefix, made once rather than on every request.
var defaultForwardNames = [3]string{DefaultForwardPrefix + "Subject", DefaultForwardPrefix + "Plan", DefaultForwardPrefix + "Auth-Method"}
