package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// A jwk is the part of a JSON Web Key (RFC 7517) that verifying needs.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	K   string `json:"k"`
}

// parseJWKS returns the keys of a JWK Set that can verify signatures.
// Keys it cannot use (for encryption, of an algorithm this package does
// not verify, malformed, or not in restrict when restrict is set) are
// left out, each with a reason in skipped: identity providers publish
// such keys beside theirs. A set with no usable key is an error.
// Symmetric ("oct") keys are used only when secrets is true: a set
// fetched from a URL is public, and a published secret is none.
func parseJWKS(data []byte, restrict []string, secrets bool) (keys []*key, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	if set.Keys == nil {
		return nil, nil, errors.New(`not a JWK Set: no "keys"`)
	}
	for i, raw := range set.Keys {
		var j jwk
		k, err := func() (*key, error) {
			if err := json.Unmarshal(raw, &j); err != nil {
				return nil, err
			}
			return j.key(restrict, secrets)
		}()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, j.Kid, err))
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("no usable key among %d: %s", len(set.Keys), strings.Join(skipped, "; "))
	}
	return keys, skipped, nil
}

// key returns the verifying key j describes. The algorithm comes from
// the key's type and curve; an "alg" member must name that same one.
func (j *jwk) key(restrict []string, secrets bool) (*key, error) {
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use %q: not for signatures", j.Use)
	}
	material, err := j.material(secrets)
	if err != nil {
		return nil, err
	}
	alg, err := algFor(material)
	if err != nil {
		return nil, err
	}
	if j.Alg != "" && j.Alg != alg {
		return nil, fmt.Errorf("alg %q: a %s key verifies only %s here", j.Alg, j.Kty, alg)
	}
	if len(restrict) > 0 && !slices.Contains(restrict, alg) {
		return nil, fmt.Errorf("%s is not among the source's Algorithms", alg)
	}
	return &key{id: j.Kid, alg: alg, material: material}, nil
}

func (j *jwk) material(secrets bool) (any, error) {
	switch j.Kty {
	case "RSA":
		n, err := decodeMember("n", j.N)
		if err != nil {
			return nil, err
		}
		e, err := decodeMember("e", j.E)
		if err != nil {
			return nil, err
		}
		// Go's rsa package takes exponents up to 2^31-1.
		eb := new(big.Int).SetBytes(e)
		if !eb.IsInt64() || eb.Int64() < 3 || eb.Int64() > 1<<31-1 || eb.Bit(0) == 0 {
			return nil, errors.New("invalid RSA exponent")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(eb.Int64())}, nil
	case "EC":
		if j.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q: only P-256 is supported", j.Crv)
		}
		x, err := decodeMember("x", j.X)
		if err != nil {
			return nil, err
		}
		y, err := decodeMember("y", j.Y)
		if err != nil {
			return nil, err
		}
		if len(x) != 32 || len(y) != 32 {
			return nil, errors.New("a P-256 coordinate is 32 bytes")
		}
		// ParseUncompressedPublicKey refuses points off the curve.
		return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), slices.Concat([]byte{4}, x, y))
	case "OKP":
		if j.Crv != "Ed25519" {
			return nil, fmt.Errorf("curve %q: only Ed25519 is supported", j.Crv)
		}
		x, err := decodeMember("x", j.X)
		if err != nil {
			return nil, err
		}
		return ed25519.PublicKey(x), nil
	case "oct":
		if !secrets {
			return nil, errors.New("a symmetric key in a public set is no secret")
		}
		return decodeMember("k", j.K)
	}
	return nil, fmt.Errorf("kty %q is not supported", j.Kty)
}

// decodeMember decodes a base64url member, tolerating the padding some
// issuers add although RFC 7518 leaves it out.
func decodeMember(name, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("no %q", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", name, err)
	}
	return b, nil
}
