// Package redact hides the secrets of connection strings before they are
// shown: in --help defaults, log lines and error messages.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a password wherever one is shown.
const Mask = "xxxxx"

// keywordPassword matches password=VALUE in a libpq keyword/value string,
// the value bare or single-quoted (with \' and \\ escapes).
var keywordPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

// URL returns s with any password replaced by Mask: the user info of a URL
// (postgres://user:secret@host), a password=... query parameter, and the
// password of a keyword/value string (host=h password=secret). Several
// comma-separated URLs (NATS) are each redacted. Text that holds no
// password comes back unchanged.
func URL(s string) string {
	if s == "" {
		return s
	}
	if !strings.Contains(s, "://") {
		return keywordPassword.ReplaceAllString(s, "${1}"+Mask)
	}
	parts := splitURLs(s)
	for i, p := range parts {
		parts[i] = oneURL(p)
	}
	return strings.Join(parts, ",")
}

// anotherURL is a comma that starts another URL of a list (NATS):
// ",scheme://". A comma anywhere else, a password's say, stays.
var anotherURL = regexp.MustCompile(`,[A-Za-z][A-Za-z0-9+.-]*://`)

func splitURLs(s string) []string {
	var parts []string
	for {
		loc := anotherURL.FindStringIndex(s)
		if loc == nil {
			return append(parts, s)
		}
		parts = append(parts, s[:loc[0]])
		s = s[loc[0]+1:]
	}
}

func oneURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Unparseable (a multi-host postgres URL with ports, say): cut
		// between "://" and the last "@" by hand.
		return byHand(s)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", Mask)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func byHand(s string) string {
	scheme, rest, _ := strings.Cut(s, "://")
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return keywordPassword.ReplaceAllString(s, "${1}"+Mask)
	}
	userinfo := rest[:at]
	if user, _, has := strings.Cut(userinfo, ":"); has && !strings.ContainsAny(user, "/?#") {
		userinfo = user + ":" + Mask
	} else if has {
		userinfo = Mask // cannot tell the user from the password: hide both
	}
	return scheme + "://" + userinfo + keywordPassword.ReplaceAllString(rest[at:], "${1}"+Mask)
}
