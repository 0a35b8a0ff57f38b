package workqtype

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidName reports whether s is a valid queue, kind or schedule name: 1 to
// 128 characters of letters, digits, '_', '.', ':' and '-'. The schema
// enforces the same rule (the workq_name domain). A loop rather than a
// regexp: it runs for every enqueued job, and the regexp cost as much as
// the rest of the client-side enqueue.
func ValidName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// NameRule says what ValidName accepts, for error messages.
const NameRule = "1-128 of A-Z a-z 0-9 _ . : -"

// ValidText reports whether s can be stored in a PostgreSQL text column:
// valid UTF-8 without NUL bytes (the server rejects both, with an error
// the caller could not tell from a database fault).
func ValidText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// ValidTopic reports whether s is a valid topic (outbox, inbox and timer
// routing key): 1 to 256 bytes of valid UTF-8 without control characters
// (C0, DEL and C1: U+0000-U+001F, U+007F-U+009F), and no space at either
// end (HTTP headers, which carry topics to webhooks, trim them). The Go
// clients, the CLI and the HTTP API all check topics with it.
func ValidTopic(s string) bool {
	if len(s) < 1 || len(s) > 256 || !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}
