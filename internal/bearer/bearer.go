// Package bearer guards HTTP endpoints with one shared secret, sent as
// "Authorization: Bearer <token>": the JSON API's and the admin API's
// optional credentials.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Token is a secret that requests must present. The zero Token guards
// nothing. It is safe for concurrent use.
type Token struct {
	sum [sha256.Size]byte // of the secret: compared whole, whatever its length
	set bool
}

// New returns the Token of secret, without the spaces and line ends
// around it (a secret file's last newline). An empty secret is an error.
func New(secret string) (Token, error) {
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return Token{}, errors.New("bearer: the token is empty")
	}
	if strings.ContainsAny(secret, " \t\r\n") {
		return Token{}, errors.New("bearer: the token contains white space")
	}
	return Token{sum: sha256.Sum256([]byte(secret)), set: true}, nil
}

// Load returns the Token read from file, or the one in the environment
// variable env when file is "" (the zero Token when neither is set). Both
// set is an error: one of them would be silently ignored.
func Load(file, env string) (Token, error) {
	v, inEnv := os.LookupEnv(env)
	switch {
	case file != "" && inEnv:
		return Token{}, fmt.Errorf("bearer: both a token file and %s are set; use one", env)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return Token{}, fmt.Errorf("bearer: %w", err)
		}
		t, err := New(string(b))
		if err != nil {
			return Token{}, fmt.Errorf("%w (in %s)", err, file)
		}
		return t, nil
	case inEnv:
		t, err := New(v)
		if err != nil {
			return Token{}, fmt.Errorf("%w (in %s)", err, env)
		}
		return t, nil
	}
	return Token{}, nil
}

// Set reports whether t guards anything.
func (t Token) Set() bool { return t.set }

// Valid reports whether r presents t. It compares SHA-256 digests in
// constant time, so the time it takes says nothing of the token, not
// even its length.
func (t Token) Valid(r *http.Request) bool {
	if !t.set {
		return true
	}
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// Guard returns h guarded by t for the requests that need reports true
// (every request when need is nil): without the token they are answered
// 401 with a JSON error and WWW-Authenticate, and h never sees them.
func (t Token) Guard(h http.Handler, need func(*http.Request) bool) http.Handler {
	if !t.set {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (need == nil || need(r)) && !t.Valid(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bouncer"`)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized","message":"this endpoint needs the token: send Authorization: Bearer <token>"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Writes reports whether r may change state: any method but GET, HEAD
// and OPTIONS.
func Writes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
