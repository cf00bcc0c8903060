package auth

import (
	"errors"
	"fmt"
	"net/http"
)

// Identity is who a request comes from, as an Authenticator verified it.
type Identity struct {
	// Subject is the verified user: the JWT's subject claim (JWTConfig.SubjectClaim,
	// "sub" by default), or the API key's ID.
	Subject string
	// Plan is the caller's plan, from JWTConfig.PlanClaim or the API key's
	// entry; "" if there is none.
	Plan string
	// Method is how the caller was verified: MethodJWT or MethodAPIKey.
	Method string
	// KeyID is the JWT's kid ("" if it has none) or the API key's ID.
	KeyID string
	// Claims are the JWT's claims as decoded from JSON (numbers are
	// float64); nil for API keys. They are the Authenticator's copy for
	// this request only: changing them changes nothing else.
	Claims map[string]any
	// Attributes are the API key's (APIKey.Attributes); nil for JWTs,
	// whose Claims hold theirs. Shared: read them, never change them.
	Attributes map[string]string
}

// Attribute is the caller's attribute name: an API key's attribute, or
// a JWT's claim of that name if it is a string; "" if it has none.
func (id Identity) Attribute(name string) string {
	if v, ok := id.Attributes[name]; ok {
		return v
	}
	if s, ok := id.Claims[name].(string); ok {
		return s
	}
	return ""
}

// The values of Identity.Method.
const (
	MethodJWT    = "jwt"
	MethodAPIKey = "api_key"
)

// ErrUnauthenticated is wrapped by every error an Authenticator returns.
// The rest of the message says why, for the logs; a client should be told
// no more than "unauthenticated", since the reason helps an attacker more
// than it helps a user.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// An Authenticator tells who sends a request. Authenticate returns an
// error wrapping ErrUnauthenticated when the request carries no
// credentials or credentials that do not verify; it never returns a
// partial Identity with an error. Implementations are safe for concurrent
// use.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

var (
	_ Authenticator = (*JWT)(nil)
	_ Authenticator = (*APIKeys)(nil)
)

// A FieldError is what NewJWT and NewAPIKeys return when one field of
// their config is wrong. Field is the field, as a Go selector from the
// config ("Skew", "Keys[1].Algorithms", "Keys[0]" for a key as a whole),
// so that a config file can point at the line it came from.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// refuse returns an error wrapping ErrUnauthenticated that names the
// authenticator, with the reason formatted from format and args.
func refuse(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnauthenticated, name, fmt.Sprintf(format, args...))
}

// validHeaderValue reports whether s can be sent as an HTTP header
// value: no control characters other than tab (RFC 9110, section 5.5).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
