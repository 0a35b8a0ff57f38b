// Package subject holds the NATS subject rules of the outbox publisher, so
// that config validation (which cannot import package publish) and the
// publisher apply the same ones.
package subject

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Valid reports whether s is a subject a message can be published to:
// dot-separated tokens, none empty, none containing whitespace or a
// control character, no wildcard token ("*" or ">") and no "*" or ">" inside
// a token, at most 1024 bytes of valid UTF-8, and not in the server's own
// namespaces ("$JS.API...", "$SYS...", "$KV..." and every other "$" subject,
// or "_INBOX..."), which a topic must never reach.
func Valid(s string) bool {
	if s == "" || len(s) > 1024 || !utf8.ValidString(s) {
		return false
	}
	if strings.HasPrefix(s, "$") || s == "_INBOX" || strings.HasPrefix(s, "_INBOX.") {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return false
		}
		for _, r := range tok {
			if r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
				return false
			}
		}
	}
	return true
}

// ValidPrefix reports whether p is "" or a valid subject.
func ValidPrefix(p string) bool { return p == "" || Valid(p) }

// FromTopic maps a topic to a subject: every character a subject cannot
// hold (whitespace, control characters, '*', '>') becomes '_', an empty
// token (leading, trailing or doubled '.') becomes "_", and prefix, when
// not empty, is joined in front with a '.'. Dots in the topic stay token
// separators, so topic "orders.created" with prefix "workq" is
// "workq.orders.created".
func FromTopic(prefix, topic string) string {
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(topic))
	if prefix != "" {
		b.WriteString(prefix)
		b.WriteByte('.')
	}
	toks := strings.Split(topic, ".")
	for i, tok := range toks {
		if i > 0 {
			b.WriteByte('.')
		}
		if tok == "" {
			b.WriteByte('_')
			continue
		}
		for _, r := range tok {
			if r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
				b.WriteByte('_')
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}
