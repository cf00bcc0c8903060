package tlsreload_test

import (
	"crypto/x509"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

var update = flag.Bool("update", false, "write new certificates into testdata")

// The example serves testdata/server.pem, for localhost and signed by
// testdata/ca.pem, both valid until 2126. go test -run TestTestdata
// -update writes new ones.
func TestTestdata(t *testing.T) {
	if *update {
		notAfter := time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)
		ca := newCA(t, "bouncer tlsreload example CA", notAfter)
		p := ca.server(t, notAfter)
		for name, b := range map[string][]byte{"ca.pem": ca.pem, "server.pem": p.certPEM, "server.key": p.keyPEM} {
			if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r, err := tlsreload.New(tlsreload.Config{CertFile: "testdata/server.pem", KeyFile: "testdata/server.key"},
		tlsreload.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	caPEM, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("testdata/ca.pem: no certificates")
	}
	if _, err := r.Current().Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots}); err != nil {
		t.Errorf("testdata/server.pem does not verify for localhost against testdata/ca.pem: %v", err)
	}
}
