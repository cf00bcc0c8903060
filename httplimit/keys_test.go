package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/httplimit"
)

// Global counts every request together; User counts the user that
// authentication middleware recorded with bouncer.WithUser, and leaves other
// requests to the other rules; ExcludeIPs skips an allowlist.
func TestGlobalUserAndAllowlist(t *testing.T) {
	s, _ := newStore(t)
	rules := []httplimit.Rule{
		{Name: "everyone", Key: httplimit.Global(), Limits: []bouncer.Limit{perMinute("m", 4)}},
		{Name: "per_user", Key: httplimit.User(), Limits: []bouncer.Limit{{Name: "m", Algorithm: bouncer.FixedWindow, Rate: 1, Period: time.Minute}}},
	}
	mw, err := httplimit.Middleware(s, rules, httplimit.Options{Exclude: httplimit.ExcludeIPs(nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.Header.Get("X-Test-User"); u != "" {
				r = r.WithContext(bouncer.WithUser(r.Context(), u))
			}
			next.ServeHTTP(w, r)
		})
	}
	h := auth(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	do := func(remote, user string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if user != "" {
			r.Header.Set("X-Test-User", user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	steps := []struct {
		remote, user string
		want         int
	}{
		{"192.0.2.1:1", "alice", 200},
		{"192.0.2.1:1", "alice", 429}, // alice's own limit
		{"192.0.2.2:1", "bob", 200},
		{"192.0.2.3:1", "", 200},   // no user: the global rule alone
		{"10.1.2.3:1", "bob", 200}, // allowlisted: not limited, not counted
		{"192.0.2.4:1", "", 200},
		{"192.0.2.5:1", "", 429}, // the global limit (4) is spent
	}
	for i, st := range steps {
		if got := do(st.remote, st.user); got != st.want {
			t.Fatalf("step %d (%s, user %q): %d, want %d", i, st.remote, st.user, got, st.want)
		}
	}
}
