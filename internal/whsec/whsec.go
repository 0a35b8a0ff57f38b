// Package whsec reads Standard Webhooks signing secrets
// (https://www.standardwebhooks.com: "whsec_" followed by the base64 of a
// random key of 24 to 64 bytes), so that config validation (which cannot
// import package publish) and the webhook publisher apply the same rules.
package whsec

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every secret.
const Prefix = "whsec_"

// The key lengths the specification allows, in bytes (192 to 512 bits).
const (
	MinKey = 24
	MaxKey = 64
)

// ErrFormat is wrapped by Parse's errors.
var ErrFormat = errors.New("not a Standard Webhooks secret")

// Parse reads s, one or more secrets separated by spaces (the first is the
// current one; the others are still signed with while receivers rotate),
// and returns their keys. Its errors say which secret is wrong and why,
// never what it holds.
func Parse(s string) ([][]byte, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrFormat)
	}
	keys := make([][]byte, len(fields))
	for i, f := range fields {
		which := fmt.Sprintf("secret %d of %d", i+1, len(fields))
		b64, ok := strings.CutPrefix(f, Prefix)
		if !ok {
			return nil, fmt.Errorf("%w: %s does not start with %q", ErrFormat, which, Prefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			// Unpadded base64 is common too.
			if key, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
				return nil, fmt.Errorf("%w: %s: what follows %q is not base64", ErrFormat, which, Prefix)
			}
		}
		if len(key) < MinKey || len(key) > MaxKey {
			return nil, fmt.Errorf("%w: %s: its key is %d bytes, want %d to %d", ErrFormat, which, len(key), MinKey, MaxKey)
		}
		keys[i] = key
	}
	return keys, nil
}
