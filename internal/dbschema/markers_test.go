package dbschema

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/workq/workq/workqtype"
)

// TestSQLMarkers keeps Rewrite's two markers meaning one thing each in all
// of workq's SQL (the migrations, the queries, the sqlc-only template, and
// the generated Go that holds the queries): every workq. that Rewrite would
// replace qualifies one of workq's objects, and every string literal
// starting 'workq_ is a notification channel (or the lease template's
// table name, which package lease replaces before the schema's rewrite).
// So Rewrite never changes anything else.
func TestSQLMarkers(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, pat := range []string{"db/migrations/*.sql", "db/queries/*.sql", "db/template/*.sql", "internal/db/gen/*.go"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil || len(m) == 0 {
			t.Fatalf("no files match %s: %v", pat, err)
		}
		files = append(files, m...)
	}
	text := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text[f] = string(b)
	}

	// workq's objects: what the migrations create, the version table, and
	// the template table.
	objects := map[string]bool{"workq_migrations": true, "workq_lease_table": true, "%I": true}
	create := regexp.MustCompile(`(?i)\bcreate\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:table|function|domain|index|trigger|view)\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:workq\.)?([a-z0-9_]+)`)
	rename := regexp.MustCompile(`(?i)\brename\s+to\s+([a-z0-9_]+)`)
	for f, s := range text {
		if strings.HasSuffix(f, ".sql") {
			for _, m := range create.FindAllStringSubmatch(s, -1) {
				objects[m[1]] = true
			}
			for _, m := range rename.FindAllStringSubmatch(s, -1) {
				objects[m[1]] = true
			}
		}
	}
	channels := map[string]bool{"'workq_'": true, "'workq_lease_table'": true}
	// cancel: running items' cancel requests; done: an awaited job or a
	// workflow ended (Client.Wait)
	for _, table := range []string{"job_runs", "outbox", "inbox", "timers", "cancel", "done"} {
		channels["'"+workqtype.NotifyChannel(Default, table)+"'"] = true
	}
	next := regexp.MustCompile(`^(%I|[a-z0-9_]+)`)
	literal := regexp.MustCompile(`^'workq_[^']*'`)
	for f, s := range text {
		for i := 0; i < len(s); i++ {
			switch {
			case strings.HasPrefix(s[i:], qualifier) && (i == 0 || !identChar(s[i-1])):
				name := next.FindString(s[i+len(qualifier):])
				if !objects[name] {
					t.Errorf("%s: %q: workq. does not qualify one of workq's objects (Rewrite would change it)", f, around(s, i))
				}
			case strings.HasPrefix(s[i:], channelPrefix):
				if lit := literal.FindString(s[i:]); !channels[lit] {
					t.Errorf("%s: %q: a literal starting 'workq_ that is not a notification channel (Rewrite would change it)", f, around(s, i))
				}
			}
		}
	}
}

func around(s string, i int) string {
	lo, hi := max(0, i-20), min(len(s), i+40)
	return s[lo:hi]
}
