package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHashKey(t *testing.T) {
	// SHA-256 of "abc", FIPS 180-2 appendix B.1.
	if got, want := HashKey("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	format := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	for _, key := range []string{"", "bk_live_0123456789", strings.Repeat("é", 100)} {
		if got := HashKey(key); !format.MatchString(got) {
			t.Errorf("HashKey(%q) = %q, want sha256: and 64 lower-case hex digits", key, got)
		}
	}
	if HashKey("a") == HashKey("b") {
		t.Error("two keys have the same hash")
	}
}

func TestAPIKeys(t *testing.T) {
	keys := []APIKey{
		{ID: "acme", Hash: HashKey("bk_acme_secret"), Plan: "pro"},
		{ID: "free-user", Hash: strings.ToUpper(HashKey("bk_free_secret")[7:])},
	}
	keys[1].Hash = "sha256:" + keys[1].Hash // upper-case hex is accepted
	header, err := NewAPIKeys(APIKeyConfig{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	both, err := NewAPIKeys(APIKeyConfig{Name: "partners", Header: "x-partner-key", Query: "api_key", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	req := func(target string, headers ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for i := 0; i < len(headers); i += 2 {
			r.Header.Add(headers[i], headers[i+1])
		}
		return r
	}
	tests := []struct {
		name string
		a    *APIKeys
		r    *http.Request
		want Identity // zero: refused
		why  string
	}{
		{"right key", header, req("/", "X-API-Key", "bk_acme_secret"), Identity{Subject: "acme", Plan: "pro", Method: MethodAPIKey, KeyID: "acme"}, ""},
		{"header in another case", header, req("/", "x-api-key", "bk_free_secret"), Identity{Subject: "free-user", Method: MethodAPIKey, KeyID: "free-user"}, ""},
		{"wrong key", header, req("/", "X-API-Key", "bk_acme_secreT"), Identity{}, "unknown key"},
		{"a stored hash as the key", header, req("/", "X-API-Key", HashKey("bk_acme_secret")), Identity{}, "unknown key"},
		{"no key", header, req("/"), Identity{}, "no key in header X-Api-Key"},
		{"empty key", header, req("/", "X-API-Key", ""), Identity{}, "empty header"},
		{"two keys", header, req("/", "X-API-Key", "bk_acme_secret", "X-API-Key", "bk_free_secret"), Identity{}, "2 values"},
		{"query not configured", header, req("/?api_key=bk_acme_secret"), Identity{}, "no key in header"},
		{"custom header", both, req("/", "X-Partner-Key", "bk_acme_secret"), Identity{Subject: "acme", Plan: "pro", Method: MethodAPIKey, KeyID: "acme"}, ""},
		{"default header not read", both, req("/", "X-API-Key", "bk_acme_secret"), Identity{}, `api_key "partners": no key in header X-Partner-Key or query parameter api_key`},
		{"query", both, req("/?api_key=bk_free_secret"), Identity{Subject: "free-user", Method: MethodAPIKey, KeyID: "free-user"}, ""},
		{"wrong key in query", both, req("/?api_key=nope"), Identity{}, "unknown key"},
		{"header before query", both, req("/?api_key=bk_free_secret", "X-Partner-Key", "bk_acme_secret"), Identity{Subject: "acme", Plan: "pro", Method: MethodAPIKey, KeyID: "acme"}, ""},
		{"wrong header, right query", both, req("/?api_key=bk_free_secret", "X-Partner-Key", "nope"), Identity{}, "unknown key"},
		{"two query values", both, req("/?api_key=a&api_key=b"), Identity{}, "2 values of query parameter api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Authenticate(tt.r)
			if tt.why == "" {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if got.Subject != tt.want.Subject || got.Plan != tt.want.Plan || got.Method != tt.want.Method || got.KeyID != tt.want.KeyID || got.Claims != nil {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("got %+v, %v; want ErrUnauthenticated saying %q", got, err, tt.why)
			}
			if got.Subject != "" || got.Method != "" {
				t.Errorf("got %+v with the error, want the zero Identity", got)
			}
		})
	}
}

func TestNewAPIKeysErrors(t *testing.T) {
	h := HashKey("k")
	tests := []struct {
		name string
		keys []APIKey
		why  string
	}{
		{"no keys", nil, "no keys"},
		{"no id", []APIKey{{Hash: h}}, "key 0 has no id"},
		{"id twice", []APIKey{{ID: "a", Hash: h}, {ID: "b", Hash: HashKey("i")}, {ID: "a", Hash: HashKey("j")}}, `key id "a" appears twice (keys 0 and 2)`},
		{"hash twice", []APIKey{{ID: "a", Hash: h}, {ID: "b", Hash: h}}, `keys "a" and "b" have the same hash`},
		{"hash twice in another case", []APIKey{{ID: "a", Hash: h}, {ID: "b", Hash: "sha256:" + strings.ToUpper(h[7:])}}, `keys "a" and "b" have the same hash`},
		{"key in clear", []APIKey{{ID: "a", Hash: "bk_live_secret"}}, `key "a": hash must be "sha256:" and 64 hex digits`},
		{"no prefix", []APIKey{{ID: "a", Hash: h[7:]}}, "hash must be"},
		{"short", []APIKey{{ID: "a", Hash: h[:70]}}, "hash must be"},
		{"not hex", []APIKey{{ID: "a", Hash: "sha256:" + strings.Repeat("g", 64)}}, "invalid byte"},
		{"control character in id", []APIKey{{ID: "a\nb", Hash: h}}, "control characters"},
		{"control character in plan", []APIKey{{ID: "a", Hash: h, Plan: "pro\r"}}, "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAPIKeys(APIKeyConfig{Keys: tt.keys})
			if err == nil || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("got %v, want an error saying %q", err, tt.why)
			}
			if errors.Is(err, ErrUnauthenticated) {
				t.Errorf("got %v: a config error must not wrap ErrUnauthenticated", err)
			}
		})
	}
}

// TestAPIKeysAmongMany finds each key among 100 000 by its digest, and
// refuses a key that is not one of them.
func TestAPIKeysAmongMany(t *testing.T) {
	const n = 100_000
	keys := make([]APIKey, n)
	for i := range keys {
		keys[i] = APIKey{ID: fmt.Sprint("key-", i), Hash: HashKey(fmt.Sprint("bk_secret_", i)), Plan: fmt.Sprint("plan-", i%7)}
	}
	a, err := NewAPIKeys(APIKeyConfig{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, n / 2, n - 2, n - 1} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", fmt.Sprint("bk_secret_", i))
		got, err := a.Authenticate(r)
		want := Identity{Subject: keys[i].ID, Plan: keys[i].Plan, Method: MethodAPIKey, KeyID: keys[i].ID}
		if err != nil || got.Subject != want.Subject || got.Plan != want.Plan || got.Method != want.Method || got.KeyID != want.KeyID {
			t.Errorf("key %d: got %+v, %v; want %+v", i, got, err, want)
		}
	}
	for _, wrong := range []string{fmt.Sprint("bk_secret_", n), "bk_secret_", "bk_secret_00", keys[0].Hash} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", wrong)
		if got, err := a.Authenticate(r); !errors.Is(err, ErrUnauthenticated) || got.Subject != "" {
			t.Errorf("key %q: got %+v, %v; want ErrUnauthenticated", wrong, got, err)
		}
	}
}
