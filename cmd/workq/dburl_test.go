package main

import (
	"strings"
	"testing"

	"github.com/workq/workq/internal/testutil"
)

// A database URL of another scheme (mysql://...) is refused by every
// command that connects, naming what is expected and with its password
// redacted; the real binary's stderr and exit code.
func TestDatabaseURLOfAnotherScheme(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	const mysql = "mysql://root:s3cret@db.example:3306/app"
	const want = "expected a PostgreSQL URL (postgres:// or postgresql://), got mysql://root:xxxxx@db.example:3306/app"
	cases := []struct {
		name string
		args []string
		want string // in the output (doctor prints its checks on stdout)
	}{
		{"jobs list", []string{"jobs", "list", "--database-url", mysql}, "workq jobs list: DATABASE_URL: " + want},
		{"jobs retry", []string{"jobs", "retry", "1", "--database-url", mysql}, "workq jobs retry: DATABASE_URL: " + want},
		{"enqueue", []string{"enqueue", "--kind", "k", "--database-url", mysql}, "workq enqueue: DATABASE_URL: " + want},
		{"worker", []string{"worker", "--database-url", mysql}, "workq worker: DATABASE_URL: " + want},
		{"maintain", []string{"maintain", "--database-url", mysql}, "workq maintain: DATABASE_URL: " + want},
		{"migrate up", []string{"migrate", "up", "--database-url", mysql}, "workq migrate: DATABASE_URL: " + want},
		{"from DATABASE_URL", []string{"stats"}, "workq stats: DATABASE_URL: " + want},
		{"doctor", []string{"doctor", "--database-url", mysql}, "DATABASE_URL: " + want},
		{"a bare --shard URL", []string{"jobs", "list", "--shard", mysql + "?tls=true"}, "workq jobs list: --shard 1: " + want + "?tls=true"},
		{"a named --shard URL", []string{"jobs", "list", "--shard", "eu=" + mysql}, "workq jobs list: --shard eu: " + want},
		{"http", []string{"stats", "--database-url", "http://u:pw@h/db"},
			"workq stats: DATABASE_URL: expected a PostgreSQL URL (postgres:// or postgresql://), got http://u:xxxxx@h/db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := ""
			if c.name == "from DATABASE_URL" {
				env = mysql
			}
			stdout, stderr, code := runBinary(t, bin, env, c.args...)
			if out := stdout + stderr; code != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "s3cret") {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 and %q, no password", code, out, c.want)
			}
		})
	}
}

func TestCheckDatabaseURL(t *testing.T) {
	cases := []struct {
		url  string
		want string // "" for accepted
	}{
		{"postgres://u:pw@h/db", ""},
		{"postgresql://h/db?sslmode=disable", ""},
		{"POSTGRES://h/db", ""},
		{"host=h dbname=db", ""},
		{"host=h dbname=db options=x://y", ""},
		{"", ""},
		{"mysql://u:pw@h/db", "DATABASE_URL: expected a PostgreSQL URL (postgres:// or postgresql://), got mysql://u:xxxxx@h/db"},
		{"mysql://u@h/db", "got mysql://u@h/db"},
		{"redis://:pw@h:6379", "got redis://:xxxxx@h:6379"},
		{"mysql://u:p%zz@h/db", "got mysql://u:xxxxx@h/db"}, // not a valid URL: redacted all the same
	}
	for _, c := range cases {
		err := checkDatabaseURL("DATABASE_URL", c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), ":pw@"):
			t.Errorf("%q: the password shows: %v", c.url, err)
		}
	}
}
