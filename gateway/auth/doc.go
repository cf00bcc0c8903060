// Package auth tells the gateway who is calling: it verifies a JSON Web
// Token or an API key and returns the caller's Identity, whose Subject
// and Plan the rate limits and the upstream use.
//
// JWT verifies tokens signed with HS256, RS256, ES256 or EdDSA, by keys
// from PEM files, JWK Set files, or a JWK Set fetched over https and kept
// fresh in the background. Each key verifies exactly the one algorithm
// its kind allows, whatever a token claims: "none" is never accepted,
// and an RSA or EC public key is never used as an HMAC secret (the
// HS/RS confusion), so a token can name only the algorithm its key was
// configured for. A token must carry "exp"; "exp", "nbf" and "iat" are
// checked with a small allowed skew, and "iss" and "aud" when
// configured. A token that names an unknown kid makes the set be fetched
// again, at most once per KeySource.MinRefresh, so a flood of made-up
// kids cannot become a flood of fetches.
//
// APIKeys verifies keys against a table that holds only their SHA-256
// digests (HashKey): a presented key is hashed and looked up by its
// digest, at one cost whatever the number of keys.
//
// Every refusal is an error wrapping ErrUnauthenticated whose message
// says why, for the logs; a client should get only "unauthenticated".
// ForwardHeaders then tells the upstream who the caller is, in headers
// the client cannot forge.
package auth
