package grpclimit_test

import (
	"context"
	"net/netip"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/clientip"
	"github.com/bouncerhq/bouncer/grpclimit"
	"github.com/bouncerhq/bouncer/internal/storekey"
)

func TestKeyFuncs(t *testing.T) {
	peer := netip.MustParseAddr("10.0.0.2")
	call := &grpclimit.Call{
		Ctx:    bouncer.WithUser(context.Background(), "u42"),
		Method: "/pkg.Svc/Get",
		Peer:   peer,
		MD:     metadata.Pairs("x-api-key", "k1", "x-api-key", "k2", "x-forwarded-for", "203.0.113.7, 198.51.100.1", "forwarded", "for=192.0.2.9"),
	}
	bare := &grpclimit.Call{Ctx: context.Background(), Method: "/pkg.Svc/Get"}
	trusted := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("198.51.100.0/24")}}
	cases := []struct {
		name string
		key  grpclimit.KeyFunc
		call *grpclimit.Call
		want string
		ok   bool
	}{
		{"global", grpclimit.Global(), bare, "", true},
		{"method", grpclimit.Method(), call, "/pkg.Svc/Get", true},
		{"metadata, first value", grpclimit.Metadata("X-API-Key"), call, "k1", true},
		{"metadata absent", grpclimit.Metadata("x-api-key"), bare, "", false},
		{"user", grpclimit.User(), call, "u42", true},
		{"no user", grpclimit.User(), bare, "", false},
		{"empty user", grpclimit.User(), &grpclimit.Call{Ctx: bouncer.WithUser(context.Background(), "")}, "", false},
		{"peer, trusting no one", grpclimit.Peer(nil), call, "10.0.0.2", true},
		{"peer, trusted: x-forwarded-for", grpclimit.Peer(trusted), call, "203.0.113.7", true},
		{"peer, trusted: forwarded", grpclimit.Peer(&clientip.Resolver{TrustedProxies: trusted.TrustedProxies, Header: "Forwarded"}), call, "192.0.2.9", true},
		{"peer, IPv6 grouped", grpclimit.Peer(nil), &grpclimit.Call{Peer: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")}, "2001:db8:1:2::/64", true},
		{"no IP peer", grpclimit.Peer(nil), bare, "", false},
		{"compose", grpclimit.Compose(grpclimit.User(), grpclimit.Method()), call, storekey.Join("u42", "/pkg.Svc/Get"), true},
		{"compose, one part missing", grpclimit.Compose(grpclimit.User(), grpclimit.Method()), bare, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.key(c.call)
			if got != c.want || ok != c.ok {
				t.Fatalf("got %q, %v, want %q, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestExcludeMethods(t *testing.T) {
	ex := grpclimit.ExcludeMethods("/grpc.health.v1.Health/", "/pkg.Svc/Ping")
	for method, want := range map[string]bool{
		"/grpc.health.v1.Health/Check":  true,
		"/grpc.health.v1.Health/Watch":  true,
		"/pkg.Svc/Ping":                 true,
		"/pkg.Svc/Pingx":                false,
		"/pkg.Svc/Get":                  false,
		"/grpc.health.v1.HealthX/Check": false,
	} {
		if got := ex(&grpclimit.Call{Method: method}); got != want {
			t.Errorf("%s: excluded %v, want %v", method, got, want)
		}
	}
}
