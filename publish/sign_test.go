package publish_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// hmacHex is the signature scheme computed without the package.
func hmacHex(secret, data string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(data))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
