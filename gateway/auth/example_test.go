package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/bouncerhq/bouncer/gateway/auth"
	"github.com/golang-jwt/jwt/v5"
)

func Example() {
	dir, err := os.MkdirTemp("", "auth-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	secret := []byte("an example secret of 32 bytes...")
	file := filepath.Join(dir, "hs256.secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		panic(err)
	}

	// A fixed clock keeps the example's token valid; leave Now nil for
	// time.Now.
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	j, err := auth.NewJWT(auth.JWTConfig{
		Name:      "example",
		Keys:      []auth.KeySource{{File: file, KeyID: "2030", Algorithms: []string{auth.HS256}}},
		Issuer:    "https://login.example",
		Audience:  []string{"api"},
		PlanClaim: "plan",
	}, auth.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer j.Close()

	// What the issuer hands the client.
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "plan": "pro", "iss": "https://login.example", "aud": "api",
		"exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "2030"
	signed, err := tok.SignedString(secret)
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/orders", nil)
	r.Header.Set("Authorization", "Bearer "+signed)
	r.Header.Set("X-Bouncer-Plan", "enterprise") // the client's own try
	id, err := j.Authenticate(r)
	if err != nil {
		panic(err)
	}
	fmt.Println(id.Method, id.Subject, id.Plan, id.KeyID)

	auth.ForwardHeaders(r.Header, id, "")
	fmt.Println(r.Header.Get("X-Bouncer-Subject"), r.Header.Get("X-Bouncer-Plan"))

	// A token signed with another secret.
	forged, err := tok.SignedString([]byte("a guessed secret, also 32 bytes."))
	if err != nil {
		panic(err)
	}
	r.Header.Set("Authorization", "Bearer "+forged)
	_, err = j.Authenticate(r)
	fmt.Println(err)
	// Output:
	// jwt alice pro 2030
	// alice pro
	// auth: unauthenticated: jwt "example": token signature is invalid: signature is invalid
}

func ExampleAPIKeys() {
	// The table holds digests, made with `bouncer gateway hash-key`.
	keys, err := auth.NewAPIKeys(auth.APIKeyConfig{Keys: []auth.APIKey{
		{ID: "acme", Hash: auth.HashKey("bk_live_acme"), Plan: "pro"},
	}})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"bk_live_acme", "bk_live_guess"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", key)
		id, err := keys.Authenticate(r)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(id.Subject, id.Plan)
	}
	fmt.Println(auth.HashKey("bk_live_acme"))
	// Output:
	// acme pro
	// auth: unauthenticated: api_key: unknown key
	// sha256:361daad4e759ee27a6fc0b9fab3c93095388d3172f726cc9ca0abe46fc287583
}
