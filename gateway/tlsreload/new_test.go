package tlsreload_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

func TestNewErrors(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	a, b := ca.server(t, time.Now().Add(time.Hour)), ca.server(t, time.Now().Add(time.Hour))
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	for name, data := range map[string][]byte{
		"cert.pem":    a.certPEM,
		"key.pem":     a.keyPEM,
		"other.key":   b.keyPEM,
		"ca.pem":      ca.pem,
		"garbage":     []byte("hello\n"),
		"encrypted":   []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"),
		"bad-der.pem": []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
	} {
		writeFile(t, path(name), data)
	}
	good := tlsreload.Config{CertFile: path("cert.pem"), KeyFile: path("key.pem")}
	with := func(edit func(*tlsreload.Config)) tlsreload.Config {
		c := good
		edit(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		c    tlsreload.Config
		want string
	}{
		{"no cert file", with(func(c *tlsreload.Config) { c.CertFile = "" }), "tlsreload: CertFile and KeyFile are required"},
		{"missing cert", with(func(c *tlsreload.Config) { c.CertFile = path("missing.pem") }),
			"tlsreload: cert file " + path("missing.pem") + ": no such file or directory"},
		{"missing key", with(func(c *tlsreload.Config) { c.KeyFile = path("missing.key") }),
			"tlsreload: key file " + path("missing.key") + ": no such file or directory"},
		{"cert not PEM", with(func(c *tlsreload.Config) { c.CertFile = path("garbage") }),
			"tlsreload: cert file " + path("garbage") + ": not PEM"},
		{"cert not DER", with(func(c *tlsreload.Config) { c.CertFile = path("bad-der.pem") }),
			"tlsreload: cert file " + path("bad-der.pem") + ": certificate 1: x509: "},
		{"key file holds a cert", with(func(c *tlsreload.Config) { c.KeyFile = path("cert.pem") }),
			"tlsreload: key file " + path("cert.pem") + ": no PRIVATE KEY block"},
		{"encrypted key", with(func(c *tlsreload.Config) { c.KeyFile = path("encrypted") }),
			"tlsreload: key file " + path("encrypted") + ": an encrypted private key is not supported"},
		{"key does not match", with(func(c *tlsreload.Config) { c.KeyFile = path("other.key") }),
			"tlsreload: key file " + path("other.key") + " does not match cert file " + path("cert.pem")},
		{"missing client CA", with(func(c *tlsreload.Config) { c.ClientAuth, c.ClientCAFile = "require", path("missing-ca.pem") }),
			"tlsreload: client CA file " + path("missing-ca.pem") + ": no such file or directory"},
		{"client CA not PEM", with(func(c *tlsreload.Config) { c.ClientAuth, c.ClientCAFile = "request", path("garbage") }),
			"tlsreload: client CA file " + path("garbage") + ": not PEM"},
		{"require without CA", with(func(c *tlsreload.Config) { c.ClientAuth = "require" }), `tlsreload: ClientAuth "require" needs a ClientCAFile`},
		{"request without CA", with(func(c *tlsreload.Config) { c.ClientAuth = "request" }), `tlsreload: ClientAuth "request" needs a ClientCAFile`},
		{"CA without a mode", with(func(c *tlsreload.Config) { c.ClientCAFile = path("ca.pem") }), `tlsreload: ClientCAFile is set but ClientAuth is "none"`},
		{"unknown mode", with(func(c *tlsreload.Config) { c.ClientAuth = "verify" }), `tlsreload: ClientAuth "verify": want none, request or require`},
		{"unknown version", with(func(c *tlsreload.Config) { c.MinVersion = "1.1" }), `tlsreload: MinVersion "1.1": want 1.2 or 1.3`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tlsreload.New(tt.c, tlsreload.Options{})
			if err == nil {
				r.Close()
				t.Fatalf("got no error, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got error %q, want %q", err, tt.want)
			}
			if strings.Contains(tt.want, "no such file") && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%q, fs.ErrNotExist) = false, want true", err)
			}
		})
	}
}

// TestValidateNamesTheField checks that Validate reads no file and says
// which field is wrong.
func TestValidateNamesTheField(t *testing.T) {
	good := tlsreload.Config{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"}
	for _, tt := range []struct {
		name  string
		edit  func(*tlsreload.Config)
		field string
	}{
		{"no key file", func(c *tlsreload.Config) { c.KeyFile = "" }, "KeyFile"},
		{"unknown mode", func(c *tlsreload.Config) { c.ClientAuth = "verify" }, "ClientAuth"},
		{"CA without a mode", func(c *tlsreload.Config) { c.ClientCAFile = "/nonexistent/ca.pem" }, "ClientCAFile"},
		{"unknown version", func(c *tlsreload.Config) { c.MinVersion = "1.1" }, "MinVersion"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			var fe *tlsreload.FieldError
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("got %v, want a *FieldError for %s", err, tt.field)
			}
		})
	}
	if err := good.Validate(); err != nil {
		t.Errorf("a config whose files do not exist: %v, want nil (Validate reads no file)", err)
	}
}
