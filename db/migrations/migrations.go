// Package migrations embeds workq's schema migrations (goose's SQL file
// format). Package migrate runs them; sqlc reads the same files.
package migrations

import "embed"

// Files holds every migration, NNNNN_name.sql at its root.
//
//go:embed *.sql
var Files embed.FS
