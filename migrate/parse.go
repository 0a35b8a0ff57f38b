package migrate

import (
	"bufio"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// migration is one parsed migration file (goose's SQL format).
type migration struct {
	version int64
	name    string   // file name
	up      []string // statements
	down    []string
	noTx    bool // -- +goose NO TRANSACTION
}

// parseAll reads every NNNNN_name.sql file of fsys, in version order.
func parseAll(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrate: read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migrate: %s: want NNNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		m, err := parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("migrate: %s: %w", e.Name(), err)
		}
		m.version, m.name = v, e.Name()
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrate: %s and %s have the same version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// parse splits one file into its Up and Down statements, as goose does:
// outside a StatementBegin/StatementEnd block a statement ends at a line
// ending in a semicolon; comment lines between statements are dropped.
func parse(text string) (migration, error) {
	var (
		m       migration
		section *[]string
		inBlock bool
		buf     strings.Builder
	)
	flush := func() {
		if s := strings.TrimSpace(buf.String()); s != "" && section != nil {
			*section = append(*section, s)
		}
		buf.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cmd, ok := strings.CutPrefix(trimmed, "-- +goose "); ok {
			switch strings.TrimSpace(cmd) {
			case "Up":
				flush()
				section = &m.up
			case "Down":
				flush()
				section = &m.down
			case "StatementBegin":
				flush()
				inBlock = true
			case "StatementEnd":
				flush()
				inBlock = false
			case "NO TRANSACTION":
				m.noTx = true
			default:
				return m, fmt.Errorf("unsupported annotation %q", trimmed)
			}
			continue
		}
		if section == nil {
			continue // the header comment
		}
		if !inBlock && buf.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if !inBlock && strings.HasSuffix(trimmed, ";") {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if inBlock {
		return m, fmt.Errorf("StatementBegin without StatementEnd")
	}
	flush()
	if m.up == nil {
		return m, fmt.Errorf("no -- +goose Up section")
	}
	return m, nil
}

// concurrently matches the CONCURRENTLY of a CREATE or DROP INDEX.
var concurrently = regexp.MustCompile(`(?i)\b((?:create\s+(?:unique\s+)?|drop\s+)index)\s+concurrently\b`)

// plainIndex returns a statement of a NO TRANSACTION migration in the form that
// runs inside a transaction: an index built or dropped without
// CONCURRENTLY (which a transaction refuses).
func plainIndex(stmt string) string {
	return concurrently.ReplaceAllString(stmt, "$1")
}
