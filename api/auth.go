package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/workq/workq/workqtype"
)

// Scope is what a token may do.
type Scope string

// Scopes. A read token may call every GET endpoint; an admin token may call
// every endpoint.
const (
	ScopeRead  Scope = "read"
	ScopeAdmin Scope = "admin"
	scopeNone  Scope = "" // an unauthenticated route (healthz, readyz, openapi.json)
)

func (s Scope) allows(need Scope) bool {
	switch need {
	case scopeNone:
		return true
	case ScopeRead:
		return s == ScopeRead || s == ScopeAdmin
	case ScopeAdmin:
		return s == ScopeAdmin
	}
	return false
}

// ParseScope reads "read" or "admin".
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeRead, ScopeAdmin:
		return Scope(s), nil
	}
	return "", fmt.Errorf("scope %q: want read or admin", s)
}

// Token is one accepted bearer token: its name (the actor "api:NAME" of
// what it does), its scope, and the SHA-256 of the secret. The secret
// itself is never stored.
type Token struct {
	Name  string
	Scope Scope
	Hash  [sha256.Size]byte
}

// TokenPrefix starts every token NewToken makes, so a leaked one is easy
// to recognise (secret scanners, logs).
const TokenPrefix = "wq_"

// ErrBadToken wraps the errors of ParseTokens.
var ErrBadToken = errors.New("bad api token entry")

// ParseTokens reads config entries NAME:SCOPE:SHA256-HEX (the api-tokens
// setting). Names are 1 to 128 of A-Z a-z 0-9 _ . - (no ':'), unique; the
// hash is 64 hex digits, also unique (one secret, one name).
func ParseTokens(entries []string) ([]Token, error) {
	var out []Token
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for i, e := range entries {
		parts := strings.Split(e, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%w %d: want NAME:SCOPE:SHA256-HEX (make one with `workq api token NAME`), got %d fields", ErrBadToken, i+1, len(parts))
		}
		name, scope, hexHash := parts[0], parts[1], parts[2]
		if !workqtype.ValidName(name) {
			return nil, fmt.Errorf("%w %d: name %q: want 1-128 of A-Z a-z 0-9 _ . -", ErrBadToken, i+1, name)
		}
		sc, err := ParseScope(scope)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrBadToken, name, err)
		}
		raw, err := hex.DecodeString(hexHash)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%w %q: the hash must be 64 hex digits (the SHA-256 of the token, not the token itself)", ErrBadToken, name)
		}
		if names[name] {
			return nil, fmt.Errorf("%w: name %q given twice", ErrBadToken, name)
		}
		t := Token{Name: name, Scope: sc}
		copy(t.Hash[:], raw)
		if other, dup := hashes[t.Hash]; dup {
			return nil, fmt.Errorf("%w: tokens %q and %q have the same hash", ErrBadToken, other, name)
		}
		names[name], hashes[t.Hash] = true, name
		out = append(out, t)
	}
	return out, nil
}

// NewToken makes a random token (32 bytes from crypto/rand) and returns the
// secret, to show once, and its config entry NAME:SCOPE:SHA256-HEX.
func NewToken(name string, scope Scope) (secret, entry string, err error) {
	if !workqtype.ValidName(name) || strings.Contains(name, ":") {
		return "", "", fmt.Errorf("token name %q: want 1-128 of A-Z a-z 0-9 _ . -", name)
	}
	if _, err := ParseScope(string(scope)); err != nil {
		return "", "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("random token: %w", err)
	}
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(secret))
	return secret, fmt.Sprintf("%s:%s:%s", name, scope, hex.EncodeToString(h[:])), nil
}

// match returns the token whose hash is the SHA-256 of secret. It compares
// with every token in constant time, so the time taken says nothing about
// which token, or how much of a hash, matched.
func match(tokens []Token, secret string) (Token, bool) {
	h := sha256.Sum256([]byte(secret))
	var found Token
	ok := 0
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(h[:], t.Hash[:]) == 1 {
			found, ok = t, 1
		}
	}
	return found, ok == 1
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
