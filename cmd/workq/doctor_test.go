package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/testdb"
)

// doctorStatuses runs `workq doctor --json` and returns each check's status
// and the command's error.
func doctorStatuses(t *testing.T, args ...string) (map[string]string, doctorReport, error) {
	t.Helper()
	out, err := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("doctor --json printed %q: %v", out, jerr)
	}
	st := map[string]string{}
	for _, c := range rep.Checks {
		st[c.Name] = c.Status
	}
	return st, rep, err
}

// On the migrated test database every check passes (or warns); on a database never
// migrated the schema check fails and the command exits non-zero.
func TestDoctorSchema(t *testing.T) {
	isolateEnv(t)
	st, rep, err := doctorStatuses(t, "--database-url", testdb.URL(t))
	// synchronous_commit warns where the test server's default is off.
	// "ok" in the JSON says what the exit code says.
	if err != nil || !rep.OK || st["connect"] != checkOK || st["schema"] != checkOK || st["synchronous_commit"] == checkFail ||
		st["primary"] != checkOK || st["timeline"] != checkOK {
		t.Fatalf("migrated database: %v, %v", st, err)
	}
	st, rep, err = doctorStatuses(t, "--database-url", emptyDatabase(t))
	if err == nil || rep.OK || st["schema"] != checkFail || st["timeline"] != checkSkip {
		t.Fatalf("empty database: %v, %v", st, err)
	}
	st, _, err = doctorStatuses(t, "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err == nil || st["connect"] != checkFail || st["replication"] != checkSkip {
		t.Fatalf("no server: %v, %v", st, err)
	}
}

// With a standby that is not synchronous the replication check warns (and
// --strict fails); once the standby is synchronous it passes. A role
// default of synchronous_commit off is reported as a warning, while
// workq's own sessions (workq.ConfigurePool) still run with on.
func TestDoctorReplication(t *testing.T) {
	isolateEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := pgembed.StartWith(ctx, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	url := primary.URL("postgres")
	if _, err := runCLI(t, "migrate", "up", "--database-url", url); err != nil {
		t.Fatal(err)
	}
	st, rep, err := doctorStatuses(t, "--database-url", url)
	if err != nil || st["replication"] != checkOK || rep.Replication == nil || rep.Replication.Standbys != 0 || st["synchronous_commit"] != checkOK {
		t.Fatalf("no standby: %v %+v, %v", st, rep.Replication, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "alter role postgres set synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	st, _, err = doctorStatuses(t, "--database-url", url)
	if err != nil || st["synchronous_commit"] != checkWarn {
		t.Fatalf("role default off: %v, %v", st, err)
	}
	async, err := primary.StartStandby(ctx, pgembed.StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, rep, err = doctorStatuses(t, "--database-url", url)
	if err != nil || st["replication"] != checkWarn || rep.Replication.Standbys != 1 || rep.Replication.Synchronous != 0 {
		t.Fatalf("async standby: %v %+v, %v", st, rep.Replication, err)
	}
	if _, _, err := doctorStatuses(t, "--database-url", url, "--strict"); err == nil || !strings.Contains(err.Error(), "warned") {
		t.Fatalf("--strict with a warning: %v", err)
	}
	// On the standby itself: not a primary.
	st, _, err = doctorStatuses(t, "--database-url", async.URL("postgres"))
	if err == nil || st["primary"] != checkFail {
		t.Fatalf("standby: %v, %v", st, err)
	}
	if err := async.Stop(); err != nil {
		t.Fatal(err)
	}
	sync, err := primary.StartStandby(ctx, pgembed.StandbyOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Stop()
	st, rep, err = doctorStatuses(t, "--database-url", url, "--strict", "--schema", "workq")
	if err == nil { // the role's default synchronous_commit still warns
		t.Fatalf("--strict passed with synchronous_commit off by default: %v", st)
	}
	if st["replication"] != checkOK || rep.Replication.Synchronous != 1 {
		t.Fatalf("sync standby: %v %+v", st, rep.Replication)
	}
	if _, err := conn.Exec(ctx, "alter role postgres reset synchronous_commit"); err != nil {
		t.Fatal(err)
	}
	if st, _, err := doctorStatuses(t, "--database-url", url, "--strict"); err != nil {
		t.Fatalf("synchronous standby and commits: --strict fails: %v, %v", st, err)
	}
}
