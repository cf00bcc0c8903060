package bearer_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bouncerhq/bouncer/internal/bearer"
)

func TestGuard(t *testing.T) {
	tok, err := bearer.New("s3cret\n")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := tok.Guard(ok, bearer.Writes)
	cases := []struct {
		method, auth string
		want         int
	}{
		{http.MethodPost, "Bearer s3cret", http.StatusNoContent},
		{http.MethodPost, "bearer s3cret", http.StatusNoContent}, // the scheme is case-insensitive
		{http.MethodPost, "", http.StatusUnauthorized},
		{http.MethodPost, "Bearer s3cre", http.StatusUnauthorized},
		{http.MethodPost, "Bearer s3cret2", http.StatusUnauthorized},
		{http.MethodPost, "Basic czNjcmV0", http.StatusUnauthorized},
		{http.MethodPost, "s3cret", http.StatusUnauthorized},
		{http.MethodDelete, "", http.StatusUnauthorized},
		{http.MethodGet, "", http.StatusNoContent}, // reads pass
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/v1/keys/reset", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s with %q: %d, want %d", c.method, c.auth, w.Code, c.want)
		}
		if w.Code == http.StatusUnauthorized && (w.Header().Get("WWW-Authenticate") == "" || !strings.Contains(w.Body.String(), `"error":"unauthorized"`)) {
			t.Errorf("%s with %q: a 401 with %q and body %s, want WWW-Authenticate and a JSON error", c.method, c.auth, w.Header().Get("WWW-Authenticate"), w.Body)
		}
	}
	// nil need guards every request; the zero Token guards none.
	w := httptest.NewRecorder()
	tok.Guard(ok, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("a GET through a guard of every request: %d, want 401", w.Code)
	}
	w = httptest.NewRecorder()
	bearer.Token{}.Guard(ok, nil).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	if w.Code != http.StatusNoContent {
		t.Errorf("the zero Token: %d, want the handler's 204", w.Code)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const env = "BOUNCER_TEST_BEARER_TOKEN"
	valid := func(tok bearer.Token, secret string) bool {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		return tok.Valid(r)
	}

	tok, err := bearer.Load(file, env)
	if err != nil || !tok.Set() || !valid(tok, "from-file") || valid(tok, "other") {
		t.Errorf("from a file: %v, set %v", err, tok.Set())
	}
	if tok, err := bearer.Load("", env); err != nil || tok.Set() {
		t.Errorf("neither set: %v, set %v, want the zero Token", err, tok.Set())
	}
	t.Setenv(env, "from-env")
	if tok, err := bearer.Load("", env); err != nil || !valid(tok, "from-env") {
		t.Errorf("from the environment: %v", err)
	}
	if _, err := bearer.Load(file, env); err == nil || !strings.Contains(err.Error(), env) {
		t.Errorf("both set: %v, want an error naming %s", err, env)
	}
	t.Setenv(env, "")
	if _, err := bearer.Load("", env); err == nil {
		t.Error("an empty variable: no error")
	}
	os.Unsetenv(env)
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := bearer.Load(f, env); err == nil {
			t.Errorf("%s: no error", filepath.Base(f))
		}
	}
	if _, err := bearer.New("two words"); err == nil {
		t.Error("a token with a space: no error")
	}
}
