package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMiddlewareImplementations checks that every middleware is
// configured as intended: under mwSmallLimit a client address is allowed
// three requests and refused the fourth, whatever its port, while another
// address is still allowed; allowed responses come from the handler and
// report the requests remaining. bare allows everything.
func TestMiddlewareImplementations(t *testing.T) {
	for _, im := range mwImpls {
		t.Run("impl="+im.name, func(t *testing.T) {
			wrap, done, err := im.new(mwSmallLimit)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			h := wrap(mwOK)
			steps := []struct {
				addr string
				want int
			}{
				{"198.18.0.1:40001", http.StatusOK},
				{"198.18.0.1:40002", http.StatusOK},
				{"198.18.0.1:40003", http.StatusOK},
				{"198.18.0.1:40004", http.StatusTooManyRequests},
				{"198.18.0.2:40001", http.StatusOK},
			}
			for i, s := range steps {
				want := s.want
				if im.name == mwBare {
					want = http.StatusOK
				}
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = s.addr
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != want {
					t.Fatalf("request %d from %s: got status %d, want %d", i+1, s.addr, w.Code, want)
				}
				if want != http.StatusOK {
					continue
				}
				if got := w.Body.String(); got != string(mwBody) {
					t.Errorf("request %d from %s: got body %q, want %q", i+1, s.addr, got, mwBody)
				}
				if im.remaining != "" && w.Header().Get(im.remaining) == "" {
					t.Errorf("request %d from %s: got no %s header, want one", i+1, s.addr, im.remaining)
				}
			}
		})
	}
}
