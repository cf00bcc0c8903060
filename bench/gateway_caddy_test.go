package bench

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
)

// startCaddy is Caddy's reverse_proxy handler at its defaults (its HTTP
// transport: keep-alive, at most 32 idle connections to the upstream), in
// this process, configured through Caddy's JSON config: one HTTP server
// on a free loopback port whose one route proxies everything to
// upstream. Besides the proxy the config says only what keeps Caddy to
// itself: no admin endpoint, no config saved, no automatic HTTPS, its
// storage, data and config directories (XDG_DATA_HOME and
// XDG_CONFIG_HOME: its TLS app writes an instance ID there whatever the
// storage) in temporary ones, and its own log at ERROR (it logs nothing
// per request at its defaults). Caddy runs one config per process: the
// one started here is stopped when tb ends.
func startCaddy(tb testing.TB, upstream string) gwProxy {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Setenv("XDG_DATA_HOME", tb.TempDir())
	tb.Setenv("XDG_CONFIG_HOME", tb.TempDir())
	type obj = map[string]any
	cfg, err := json.Marshal(obj{
		"admin":   obj{"disabled": true, "config": obj{"persist": false}},
		"logging": obj{"logs": obj{"default": obj{"level": "ERROR"}}},
		"storage": obj{"module": "file_system", "root": tb.TempDir()},
		"apps": obj{"http": obj{"servers": obj{"bench": obj{
			"listen":          []string{"127.0.0.1:0"},
			"automatic_https": obj{"disable": true},
			"routes": []obj{{"handle": []obj{{
				"handler":   "reverse_proxy",
				"upstreams": []obj{{"dial": u.Host}},
			}}}},
		}}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		tb.Fatalf("starting Caddy: %v", err)
	}
	tb.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			tb.Errorf("stopping Caddy: %v", err)
		}
	})
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		tb.Fatal(err)
	}
	srv := app.(*caddyhttp.App).Servers["bench"]
	if srv == nil || len(srv.Listeners()) != 1 {
		tb.Fatalf("Caddy's server: %v, want one listener", srv)
	}
	return gwProxy{url: "http://" + srv.Listeners()[0].Addr().String()}
}
