package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/internal/edgetest"
	"github.com/bouncerhq/bouncer/rules"
)

// BenchmarkMeteredRoute proxies a metered request through the gateway to
// a loopback upstream that streams three chunks and its usage in a
// trailer (chat), or sends 64 bytes (files); the client reads it all.
func BenchmarkMeteredRoute(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files") {
			io.WriteString(w, strings.Repeat("x", 64))
			return
		}
		w.Header().Set("Trailer", "X-Usage-Tokens")
		for range 3 {
			io.WriteString(w, "token ")
			http.NewResponseController(w).Flush()
		}
		w.Header().Set("X-Usage-Tokens", "10")
	}))
	defer up.Close()
	cfg, err := gateway.Parse("gateway.yaml", []byte(strings.ReplaceAll(meteredGateway, "UPSTREAM", up.URL)))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := rules.Parse("rules.yaml", []byte(strings.Replace(meteredRules, "rate: 100,", "rate: 50000000000,", 1)))
	if err != nil {
		b.Fatal(err)
	}
	ledger := &edgetest.Ledger{}
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, ledger), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	for _, path := range []string{"/chat", "/files"} {
		b.Run("route="+path[1:], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, path, nil)
				req.Header.Set("X-Key", "k1")
				req.Header.Set("X-Estimate", "5")
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
	if ledger.Sum("minute") == 0 {
		b.Fatal("nothing was charged")
	}
}
