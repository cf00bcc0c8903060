package auth

import (
	"net/http"
	"slices"
	"testing"
)

func TestForwardHeaders(t *testing.T) {
	client := func() http.Header {
		h := http.Header{}
		h.Set("X-Bouncer-Subject", "admin") // spoofed
		h.Set("X-Bouncer-Plan", "enterprise")
		h["x-bouncer-subject"] = []string{"admin"} // not canonical: set on the map directly
		h["X-BOUNCER-AUTH-METHOD"] = []string{"jwt"}
		h.Set("X-Bouncer-Anything", "spoofed")
		h.Set("X-Bouncer", "kept: not the prefix")
		h.Set("X-Request-Id", "r1")
		return h
	}
	alice := Identity{Subject: "alice", Plan: "pro", Method: MethodJWT, KeyID: "k1"}
	tests := []struct {
		name   string
		id     Identity
		prefix string
		want   http.Header
	}{
		{"identity", alice, "", http.Header{
			"X-Bouncer-Subject":     {"alice"},
			"X-Bouncer-Plan":        {"pro"},
			"X-Bouncer-Auth-Method": {"jwt"},
			"X-Bouncer":             {"kept: not the prefix"},
			"X-Request-Id":          {"r1"},
		}},
		{"no plan", Identity{Subject: "acme", Method: MethodAPIKey, KeyID: "acme"}, "", http.Header{
			"X-Bouncer-Subject":     {"acme"},
			"X-Bouncer-Auth-Method": {"api_key"},
			"X-Bouncer":             {"kept: not the prefix"},
			"X-Request-Id":          {"r1"},
		}},
		{"anonymous", Identity{}, "", http.Header{
			"X-Bouncer":    {"kept: not the prefix"},
			"X-Request-Id": {"r1"},
		}},
		{"own prefix", alice, "x-gw-", http.Header{
			"X-Gw-Subject":          {"alice"},
			"X-Gw-Plan":             {"pro"},
			"X-Gw-Auth-Method":      {"jwt"},
			"X-Bouncer-Subject":     {"admin"},
			"x-bouncer-subject":     {"admin"},
			"X-Bouncer-Plan":        {"enterprise"},
			"X-BOUNCER-AUTH-METHOD": {"jwt"},
			"X-Bouncer-Anything":    {"spoofed"},
			"X-Bouncer":             {"kept: not the prefix"},
			"X-Request-Id":          {"r1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := client()
			if tt.prefix == "x-gw-" {
				h.Set("X-GW-Subject", "spoofed")
			}
			ForwardHeaders(h, tt.id, tt.prefix)
			if len(h) != len(tt.want) {
				t.Errorf("got %d headers %v, want %d %v", len(h), h, len(tt.want), tt.want)
			}
			for name, want := range tt.want {
				if got := h[name]; !slices.Equal(got, want) {
					t.Errorf("got %s: %q, want %q", name, got, want)
				}
			}
		})
	}
}
