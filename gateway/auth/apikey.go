package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// DefaultAPIKeyHeader is the header an API key comes in when
// APIKeyConfig.Header is "".
const DefaultAPIKeyHeader = "X-API-Key"

// APIKeyConfig configures an APIKeys authenticator. Its yaml tags, and
// its APIKeys', are their names in `bouncer gateway`'s config file, which
// holds it as is.
type APIKeyConfig struct {
	// Name names the authenticator in errors and logs.
	Name string `yaml:"-"`
	// Header is the request header that carries the key, "X-API-Key" if
	// "".
	Header string `yaml:"header"`
	// Query, when not "", is a query parameter that carries the key when
	// the header is absent. A key in a URL ends up in access logs and
	// browser histories; prefer the header.
	Query string `yaml:"query"`
	// Keys are the accepted keys, at least one.
	Keys []APIKey `yaml:"keys"`
}

// An APIKey is one accepted key. The key itself is never stored: only its
// digest, as HashKey makes it.
type APIKey struct {
	// ID names the key; it becomes the caller's Identity.Subject and
	// KeyID. It must be unique, not empty and free of control characters.
	ID string `yaml:"id"`
	// Hash is HashKey of the key: "sha256:" and 64 hex digits.
	Hash string `yaml:"hash"`
	// Plan is the caller's plan, "" for none.
	Plan string `yaml:"plan"`
	// Attributes are facts of the key's owner that its limits may read
	// (a descriptor's attribute:<name>), such as its time zone or
	// billing day: the gateway's config vouches for them, as for the
	// plan. Names and values must be free of control characters; at most
	// 32 of them, each value at most 256 bytes.
	Attributes map[string]string `yaml:"attributes"`
}

// APIKeys authenticates requests by an API key in a header or a query
// parameter. It is safe for concurrent use.
type APIKeys struct {
	name   string
	header string
	query  string

	// keys are the entries by the SHA-256 of their key: one hash and one
	// lookup per request, whatever the number of entries.
	//
	// Security: the lookup's time (the map's hashing and comparison of
	// digests) may depend on the presented key's digest and on the
	// stored ones, but a digest says nothing of use about a key: to learn
	// a key from timing, one would have to invert SHA-256. The digests
	// themselves are no secret either: the config holds them.
	keys map[[sha256.Size]byte]int32
	// entries are the keys' owners, by the index keys holds: apart, so
	// that the map holds no pointers for the garbage collector to scan.
	entries []apiKey
}

// apiKey is who an entry's key belongs to.
type apiKey struct {
	id    string
	plan  string
	attrs map[string]string
}

const hashPrefix = "sha256:"

// HashKey returns the digest under which an APIKey stores key:
// "sha256:" followed by the lower-case hex SHA-256 of key.
//
// SHA-256 without salt or stretching is enough because API keys are
// long random strings, not passwords: there is no dictionary to try.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// NewAPIKeys returns an APIKeys for c, or an error naming the first entry
// that is invalid (a *FieldError).
func NewAPIKeys(c APIKeyConfig) (*APIKeys, error) {
	a := &APIKeys{name: "api_key", header: DefaultAPIKeyHeader, query: c.Query}
	if c.Name != "" {
		a.name = fmt.Sprintf("api_key %q", c.Name)
	}
	if c.Header != "" {
		a.header = c.Header
	}
	a.header = textproto.CanonicalMIMEHeaderKey(a.header)
	fail := func(field, format string, args ...any) (*APIKeys, error) {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("auth: %s: %s", a.name, fmt.Sprintf(format, args...))}
	}
	if len(c.Keys) == 0 {
		return fail("Keys", "no keys")
	}
	ids := make(map[string]int, len(c.Keys))
	if len(c.Keys) > math.MaxInt32 {
		return fail("Keys", "%d keys, over %d", len(c.Keys), math.MaxInt32)
	}
	a.keys = make(map[[sha256.Size]byte]int32, len(c.Keys))
	a.entries = make([]apiKey, len(c.Keys))
	for i, k := range c.Keys {
		at := func(field string) string { return "Keys[" + strconv.Itoa(i) + "]" + field }
		if k.ID == "" {
			return fail(at(".ID"), "key %d has no id", i)
		}
		if !validHeaderValue(k.ID) || !validHeaderValue(k.Plan) {
			return fail(at(""), "key %q: id and plan must not hold control characters", k.ID)
		}
		if len(k.Attributes) > 32 {
			return fail(at(".Attributes"), "key %q: %d attributes, at most 32", k.ID, len(k.Attributes))
		}
		for name, v := range k.Attributes {
			if name == "" || !validHeaderValue(name) || !validHeaderValue(v) || len(v) > 256 {
				return fail(at(".Attributes"), "key %q: attribute %q: a name and a value of at most 256 bytes, free of control characters", k.ID, name)
			}
		}
		if first, dup := ids[k.ID]; dup {
			return fail(at(".ID"), "key id %q appears twice (keys %d and %d)", k.ID, first, i)
		}
		ids[k.ID] = i
		d, err := parseHash(k.Hash)
		if err != nil {
			return fail(at(".Hash"), "key %q: %v", k.ID, err)
		}
		if other, dup := a.keys[d]; dup {
			return fail(at(".Hash"), "keys %q and %q have the same hash", a.entries[other].id, k.ID)
		}
		a.keys[d] = int32(i)
		a.entries[i] = apiKey{id: k.ID, plan: k.Plan, attrs: k.Attributes}
	}
	return a, nil
}

func parseHash(h string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	hexDigits, ok := strings.CutPrefix(h, hashPrefix)
	if !ok || len(hexDigits) != hex.EncodedLen(sha256.Size) {
		return d, errors.New(`hash must be "sha256:" and 64 hex digits (bouncer gateway hash-key makes one)`)
	}
	if _, err := hex.Decode(d[:], []byte(hexDigits)); err != nil {
		return d, fmt.Errorf("hash: %w", err)
	}
	return d, nil
}

// Authenticate returns the Identity of the key r carries in the header or,
// if the header is absent and APIKeyConfig.Query is set, in the query. A
// request with neither, with more than one value, or with a key that
// matches no entry gets an error wrapping ErrUnauthenticated.
//
// The presented key is found by its SHA-256 in a map of the entries'
// digests: its cost does not grow with the number of entries, and its
// time says nothing of use about the key (see the keys field).
func (a *APIKeys) Authenticate(r *http.Request) (Identity, error) {
	key, err := a.presented(r)
	if err != nil {
		return Identity{}, err
	}
	i, ok := a.keys[sha256.Sum256([]byte(key))]
	if !ok {
		return Identity{}, refuse(a.name, "unknown key")
	}
	k := a.entries[i]
	return Identity{Subject: k.id, Plan: k.plan, Method: MethodAPIKey, KeyID: k.id, Attributes: k.attrs}, nil
}

func (a *APIKeys) presented(r *http.Request) (string, error) {
	where := "header " + a.header
	values := r.Header[a.header]
	if len(values) == 0 && a.query != "" {
		where = "query parameter " + a.query
		values = r.URL.Query()[a.query]
	}
	switch {
	case len(values) == 0 && a.query != "":
		return "", refuse(a.name, "no key in header %s or query parameter %s", a.header, a.query)
	case len(values) == 0:
		return "", refuse(a.name, "no key in %s", where)
	case len(values) > 1:
		return "", refuse(a.name, "%d values of %s", len(values), where)
	case values[0] == "":
		return "", refuse(a.name, "empty %s", where)
	}
	return values[0], nil
}
