package main

import (
	"fmt"
	"strings"

	"github.com/workq/workq/internal/redact"
)

// checkDatabaseURL refuses a URL whose scheme is not PostgreSQL's
// (mysql://, http://...) with a hint, before pgx's "cannot parse ... as
// keyword/value" sends the reader looking in the wrong place. A
// keyword/value string (host=db dbname=app, no "://") is left to pgx. The
// error shows the URL with its password redacted; name says where the URL
// came from (DATABASE_URL, --shard 2).
func checkDatabaseURL(name, v string) error {
	scheme, _, ok := strings.Cut(strings.TrimSpace(v), "://")
	if !ok || strings.ContainsAny(scheme, " =") {
		return nil // keyword/value, whose values may hold "://"
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return nil
	}
	return fmt.Errorf("%s: expected a PostgreSQL URL (postgres:// or postgresql://), got %s", name, redact.URL(strings.TrimSpace(v)))
}
