package gateway_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/gateway"
)

// TestAuthCacheTokensConfig checks that a JWT authenticator's
// cache_tokens out of its bounds is refused with the file, the line and
// the field (a scalar field is reported at the line of its mapping, as
// every scalar of the config is).
func TestAuthCacheTokensConfig(t *testing.T) {
	for _, size := range []string{"-1", "16777217"} {
		t.Run(size, func(t *testing.T) {
			yaml := "listeners: [{addr: x}]\nauth:\n  u:\n    jwt:\n      keys: [{jwks_url: \"https://idp.test/a\"}]\n      cache_tokens: " + size + "\n" +
				"routes: [{name: a, path_prefix: /, upstreams: [\"http://h:1\"], auth: u}]\n"
			want := `g.yaml:5: auth.u.jwt.cache_tokens: auth: jwt "u": CacheTokens ` + size + " is not between 1 and 16777216"
			cfg, err := gateway.Parse("g.yaml", []byte(yaml))
			if err == nil {
				var g *gateway.Gateway
				if g, err = gateway.New(cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
					g.Close()
				}
			}
			var ce *gateway.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Parse and New: %v, want a *ConfigError containing %q", err, want)
			}
		})
	}
}
