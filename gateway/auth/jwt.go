package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig configures a JWT authenticator. Its yaml tags, and its
// KeySources', are their names in `bouncer gateway`'s config file, which
// holds it as is.
type JWTConfig struct {
	// Name names the authenticator in errors and logs.
	Name string `yaml:"-"`
	// Keys are where the verifying keys come from, at least one source.
	Keys []KeySource `yaml:"keys"`
	// Issuer, when not "", is the only "iss" accepted.
	Issuer string `yaml:"issuer"`
	// Audience, when not empty, lists the audiences accepted: the token's
	// "aud" must hold at least one of them.
	Audience []string `yaml:"audience"`
	// Skew is the clock skew allowed when checking "exp", "nbf" and
	// "iat": 30s if 0, at most 5m.
	Skew time.Duration `yaml:"skew"`
	// SubjectClaim is the claim that names the user, "sub" if "". A token
	// whose subject claim is not a non-empty string is refused.
	SubjectClaim string `yaml:"subject_claim"`
	// PlanClaim, when not "", is the claim that names the caller's plan.
	// A token without it has the plan ""; one where it is not a string
	// is refused.
	PlanClaim string `yaml:"plan_claim"`
	// MaxTokenBytes is the longest token accepted, 8192 if 0. A longer
	// one is refused before any of it is decoded.
	MaxTokenBytes int `yaml:"max_token_bytes"`
	// Header is the request header that carries the token,
	// "Authorization" if "". Authorization holds "Bearer <token>" (the
	// scheme in any case); any other header holds the token alone.
	Header string `yaml:"header"`
	// CacheTokens is the most tokens that verified remembered at once
	// (see JWT.Authenticate), 65536 if 0, from 1 to 16777216; past it,
	// the least recently used are forgotten. A token takes about 800
	// bytes with a few short claims, more with more; the memory is taken
	// as tokens verify, not up front.
	CacheTokens int `yaml:"cache_tokens"`
}

// A KeySource is where verifying keys come from: exactly one of File,
// JWKSFile and JWKSURL.
type KeySource struct {
	// File is a PEM file holding an RSA, EC (P-256) or Ed25519 public key
	// (PKIX or PKCS #1) or a certificate, whose key is used without
	// checking its dates or chain. With Algorithms exactly [HS256], File
	// holds the HMAC secret instead: its exact bytes, at least 32, with no
	// trailing newline. A file with a PEM block is refused as a secret,
	// so that a public key cannot become one.
	File string `yaml:"file"`
	// JWKSFile is a file holding a JWK Set (RFC 7517).
	JWKSFile string `yaml:"jwks_file"`
	// JWKSURL is a JWK Set fetched over https (http only to a loopback
	// address), at most 1 MiB. It is fetched in the background as soon as
	// NewJWT returns, again every RefreshEvery, and when a token names a
	// kid it does not hold, no sooner than MinRefresh after the previous
	// fetch began: a flood of tokens with made-up kids makes at most one
	// fetch per MinRefresh. A failed fetch keeps the keys fetched before
	// and is tried again after MinRefresh. Tokens that arrive before the
	// first fetch ends wait for it. Symmetric keys in it are not used.
	JWKSURL string `yaml:"jwks_url"`
	// RefreshEvery is how often JWKSURL is fetched, 1h if 0.
	RefreshEvery time.Duration `yaml:"-"`
	// MinRefresh is the least time between two fetches of JWKSURL that a
	// token with an unknown kid causes, 1m if 0, at least 1s, at most
	// RefreshEvery.
	MinRefresh time.Duration `yaml:"-"`
	// KeyID is the kid of File's key. A key with the KeyID "" verifies
	// tokens without a kid, and tokens with any kid when it is the only
	// key of the JWTConfig.
	KeyID string `yaml:"kid"`
	// Algorithms are the algorithms this source's keys may verify, among
	// HS256, RS256, ES256 and EdDSA; a token whose alg is not allowed for
	// the key its kid names is refused. Required for File, where each must
	// be the one the key's kind verifies. For a JWK Set each key's
	// algorithm comes from its kty and crv, and its "alg" member, if any,
	// must name that one; Algorithms, if set, leaves out the keys of other
	// algorithms.
	Algorithms []string `yaml:"algorithms"`
}

// Options are the dependencies of a JWT authenticator. The zero value is
// usable.
type Options struct {
	// HTTPClient fetches JWKSURL; nil means http.DefaultClient. Each
	// fetch also has a 10s deadline.
	HTTPClient *http.Client
	// Now is the clock that "exp", "nbf" and "iat", and MinRefresh, are
	// read by; nil means time.Now.
	Now func() time.Time
	// Logger receives the failed fetches of JWKSURL (Warn) and the keys
	// of a JWK Set that are not used, with the reason (Info for a file,
	// Debug for a URL, fetched again and again); nil means no logs.
	Logger *slog.Logger
}

// JWT authenticates requests by a JSON Web Token signed with HS256,
// RS256, ES256 or EdDSA. It is safe for concurrent use.
type JWT struct {
	name         string
	parser       *jwt.Parser
	header       string
	bearer       bool
	maxBytes     int
	subjectClaim string
	planClaim    string
	static       []*key
	remotes      []*remote
	skew         time.Duration
	now          func() time.Time
	verified     *verifiedTokens

	lookups atomic.Int64 // key lookups, which tests count
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

const (
	defaultSkew          = 30 * time.Second
	maxSkew              = 5 * time.Minute
	defaultMaxTokenBytes = 8192
)

// NewJWT returns a JWT for c. It reads File and JWKSFile now, and an
// error names the file; it starts one goroutine per JWKSURL, which Close
// stops. An error about one field of c is a *FieldError.
func NewJWT(c JWTConfig, o Options) (*JWT, error) {
	j := &JWT{name: "jwt"}
	if c.Name != "" {
		j.name = fmt.Sprintf("jwt %q", c.Name)
	}
	if err := j.settings(c); err != nil {
		return nil, err
	}
	j.now = o.Now
	if j.now == nil {
		j.now = time.Now
	}
	client := o.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("authenticator", j.name)
	for i, s := range c.Keys {
		if field, err := j.addSource(s, client, log); err != nil {
			return nil, j.fieldError(fmt.Sprintf("Keys[%d]", i)+field, fmt.Errorf("key source %d: %w", i, err))
		}
	}
	j.parser = jwt.NewParser(parserOptions(c, j.skew, j.now)...)
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	for _, r := range j.remotes {
		j.wg.Go(func() { r.run(ctx) })
	}
	return j, nil
}

// settings checks c's fields other than its key sources, and sets j's
// from them and their defaults.
func (j *JWT) settings(c JWTConfig) error {
	j.header, j.maxBytes, j.subjectClaim, j.planClaim = "Authorization", c.MaxTokenBytes, c.SubjectClaim, c.PlanClaim
	if c.Header != "" {
		j.header = textproto.CanonicalMIMEHeaderKey(c.Header)
	}
	j.bearer = j.header == "Authorization"
	if j.maxBytes == 0 {
		j.maxBytes = defaultMaxTokenBytes
	}
	if j.maxBytes < 0 {
		return j.fieldError("MaxTokenBytes", fmt.Errorf("MaxTokenBytes %d is negative", j.maxBytes))
	}
	if j.subjectClaim == "" {
		j.subjectClaim = "sub"
	}
	j.skew = c.Skew
	if j.skew == 0 {
		j.skew = defaultSkew
	}
	if j.skew < 0 || j.skew > maxSkew {
		return j.fieldError("Skew", fmt.Errorf("Skew %v is not between 0 and %v", j.skew, maxSkew))
	}
	if slices.Contains(c.Audience, "") {
		return j.fieldError("Audience", errors.New("an empty Audience"))
	}
	size := cmp.Or(c.CacheTokens, defaultCacheTokens)
	if size < 1 || size > maxCacheTokens {
		return j.fieldError("CacheTokens", fmt.Errorf("CacheTokens %d is not between 1 and %d", size, maxCacheTokens))
	}
	j.verified = newVerifiedTokens(size, verifiedShards)
	if len(c.Keys) == 0 {
		return j.fieldError("Keys", errors.New("no Keys"))
	}
	return nil
}

// parserOptions are the checks of a token's claims that c asks for.
func parserOptions(c JWTConfig, skew time.Duration, now func() time.Time) []jwt.ParserOption {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algorithms),
		jwt.WithLeeway(skew),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(now),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if len(c.Audience) > 0 {
		opts = append(opts, jwt.WithAudience(c.Audience...))
	}
	return opts
}

func (j *JWT) fieldError(field string, err error) error {
	return &FieldError{Field: field, Err: fmt.Errorf("auth: %s: %w", j.name, err)}
}

// addSource adds the keys of s, or says what is wrong with it: the field
// at fault (".File", ".Algorithms", or "" for the source as a whole) and
// why.
func (j *JWT) addSource(s KeySource, client *http.Client, log *slog.Logger) (field string, err error) {
	set := 0
	for _, v := range []string{s.File, s.JWKSFile, s.JWKSURL} {
		if v != "" {
			set++
		}
	}
	switch {
	case set != 1:
		return "", errors.New("exactly one of File, JWKSFile and JWKSURL must be set")
	case s.KeyID != "" && s.File == "":
		return ".KeyID", errors.New("KeyID is for File: a JWK Set names its keys")
	case (s.RefreshEvery != 0 || s.MinRefresh != 0) && s.JWKSURL == "":
		return "", errors.New("RefreshEvery and MinRefresh are for JWKSURL")
	}
	if err := checkAlgorithms(s.Algorithms, s.File == ""); err != nil {
		if s.File != "" {
			err = fmt.Errorf("file %s: %w", s.File, err)
		}
		return ".Algorithms", err
	}
	switch {
	case s.File != "":
		k, err := loadFile(s)
		if err != nil {
			return ".File", fmt.Errorf("file %s: %w", s.File, err)
		}
		j.static = append(j.static, k)
	case s.JWKSFile != "":
		keys, err := loadJWKSFile(s, log)
		if err != nil {
			return ".JWKSFile", err
		}
		j.static = append(j.static, keys...)
	default:
		r, err := newRemote(s, j.now, client, log)
		if err != nil {
			return ".JWKSURL", err
		}
		j.remotes = append(j.remotes, r)
	}
	return "", nil
}

// loadJWKSFile reads the keys of s's JWKSFile, and logs those it leaves
// out.
func loadJWKSFile(s KeySource, log *slog.Logger) ([]*key, error) {
	data, err := os.ReadFile(s.JWKSFile)
	if err != nil {
		return nil, err
	}
	keys, skipped, err := parseJWKS(data, s.Algorithms, true)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", s.JWKSFile, err)
	}
	for _, why := range skipped {
		log.Info("auth: a key of a JWK Set is not used", "file", s.JWKSFile, "reason", why)
	}
	return keys, nil
}

// newRemote returns the fetcher of s's JWKSURL.
func newRemote(s KeySource, now func() time.Time, client *http.Client, log *slog.Logger) (*remote, error) {
	u, err := url.Parse(s.JWKSURL)
	if err != nil {
		return nil, err
	}
	if err := checkURL(u); err != nil {
		return nil, fmt.Errorf("JWKSURL %s: %w", u.Redacted(), err)
	}
	r := &remote{
		url:      s.JWKSURL,
		label:    u.Redacted(),
		client:   client,
		every:    cmp.Or(s.RefreshEvery, defaultRefreshEvery),
		min:      cmp.Or(s.MinRefresh, defaultMinRefresh),
		restrict: s.Algorithms,
		now:      now,
		log:      log,
		kick:     make(chan struct{}, 1),
	}
	if r.min < leastMinRefresh || r.min > r.every {
		return nil, fmt.Errorf("MinRefresh %v is not between %v and RefreshEvery (%v)", r.min, leastMinRefresh, r.every)
	}
	return r, nil
}

// Close stops fetching JWK Sets from their URLs and waits until the
// fetching goroutines are gone. The keys fetched so far still verify
// tokens. Close may be called more than once.
func (j *JWT) Close() {
	j.cancel()
	j.wg.Wait()
}

// Authenticate returns the Identity of the verified token r carries. The
// token must be signed by a configured key with an algorithm allowed for
// that key, and must hold "exp"; "exp", "nbf" and "iat" are checked
// against Options.Now with JWTConfig.Skew, and "iss" and "aud" when the
// config sets them. Every error wraps ErrUnauthenticated, and also the
// jwt package's error (such as jwt.ErrTokenExpired) when it has one.
//
// A token whose kid no key holds makes the JWK Sets at a URL be fetched
// again (see KeySource.JWKSURL); the request waits for that fetch, or
// until its context is done.
//
// A token that verified is remembered (up to JWTConfig.CacheTokens of
// them, the most recently used, by the SHA-256 of its bytes): presented
// again, it is not parsed and verified again while its times allow it
// and every JWK Set is the one it was verified with; it is forgotten at
// its "exp" (plus the skew). A token that failed is never remembered.
func (j *JWT) Authenticate(r *http.Request) (Identity, error) {
	raw, err := j.token(r)
	if err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256([]byte(raw))
	if id, ok := j.verified.get(sum, j.now(), j.remotes); ok {
		return id, nil
	}
	var keysets []*[]*key // before verifying: a refresh meanwhile forgets the token
	for _, r := range j.remotes {
		keysets = append(keysets, r.keys.Load())
	}
	claims := jwt.MapClaims{}
	tok, err := j.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		return j.keyFor(r.Context(), t)
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %s: %w", ErrUnauthenticated, j.name, err)
	}
	sub, _ := claims[j.subjectClaim].(string)
	if sub == "" {
		return Identity{}, refuse(j.name, "claim %q is not a non-empty string", j.subjectClaim)
	}
	if !validHeaderValue(sub) {
		return Identity{}, refuse(j.name, "claim %q holds control characters", j.subjectClaim)
	}
	var plan string
	if j.planClaim != "" {
		if v, ok := claims[j.planClaim]; ok {
			if plan, ok = v.(string); !ok || !validHeaderValue(plan) {
				return Identity{}, refuse(j.name, "claim %q is not a string without control characters", j.planClaim)
			}
		}
	}
	kid, _ := tok.Header["kid"].(string)
	id := Identity{Subject: sub, Plan: plan, Method: MethodJWT, KeyID: kid, Claims: claims}
	j.verified.put(sum, id, claims, j.skew, keysets)
	return id, nil
}

// token returns the token r carries, before anything of it is decoded.
func (j *JWT) token(r *http.Request) (string, error) {
	values := r.Header[j.header]
	switch {
	case len(values) == 0:
		return "", refuse(j.name, "no %s header", j.header)
	case len(values) > 1:
		return "", refuse(j.name, "%d %s headers", len(values), j.header)
	}
	tok := values[0]
	if j.bearer {
		scheme, rest, _ := strings.Cut(tok, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", refuse(j.name, "the %s header is not a Bearer token", j.header)
		}
		tok = strings.TrimLeft(rest, " ")
	}
	switch {
	case tok == "":
		return "", refuse(j.name, "empty token")
	case len(tok) > j.maxBytes:
		return "", refuse(j.name, "a token of %d bytes, over MaxTokenBytes (%d)", len(tok), j.maxBytes)
	}
	return tok, nil
}

// keyFor returns the key, or keys, that may verify t: those answering to
// t's kid whose algorithm is t's alg.
func (j *JWT) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	j.lookups.Add(1)
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515, section 4.1.11: extensions not understood make the
		// token invalid, and none is understood here.
		return nil, errors.New(`a "crit" header`)
	}
	var kid string
	if v, ok := t.Header["kid"]; ok {
		if kid, ok = v.(string); !ok {
			return nil, errors.New("kid is not a string")
		}
	}
	keys := j.match(kid)
	if len(keys) == 0 && len(j.remotes) > 0 {
		var waits []<-chan struct{}
		for _, r := range j.remotes {
			if done := r.refresh(); done != nil {
				waits = append(waits, done)
			}
		}
		for _, done := range waits {
			select {
			case <-done:
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for the keys: %w", context.Cause(ctx))
			}
		}
		keys = j.match(kid)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no key for kid %q", kid)
	}
	alg := t.Method.Alg()
	var set jwt.VerificationKeySet
	for _, k := range keys {
		if k.alg == alg {
			set.Keys = append(set.Keys, k.material)
		}
	}
	switch len(set.Keys) {
	case 0:
		return nil, fmt.Errorf("alg %s is not allowed for kid %q", alg, kid)
	case 1:
		return set.Keys[0], nil
	}
	return set, nil
}

// match returns the keys that answer to kid.
func (j *JWT) match(kid string) []*key {
	only := len(j.static) == 1 && len(j.remotes) == 0
	var keys []*key
	for _, k := range j.static {
		if k.id == kid || k.id == "" && only {
			keys = append(keys, k)
		}
	}
	for _, r := range j.remotes {
		for _, k := range r.current() {
			if k.id == kid {
				keys = append(keys, k)
			}
		}
	}
	return keys
}
