package test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/migrate"
)

// Fencing numbers never go backwards across a failover, even to a standby
// that had not received the last commits (design §26): a job claimed and a
// lock taken twice on timeline 1, the second time after the standby was cut
// off, then the standby promoted (timeline 2) and the same job and lock
// taken there. The new primary knows only the first numbers, yet hands out
// numbers above both: the timeline's epoch in the high bits.
func TestFencingNumbersSurviveLossyFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary, err := pgembed.StartWith(ctx, pgembed.Options{StopWhenGone: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	pp := epochPool(t, ctx, primary.URL("postgres"))
	if _, err := epochMigrateUp(ctx, pp); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, pgembed.StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()

	id, err := jobq.New(jobq.Options{}).Enqueue(ctx, pp, jobq.Job{Queue: "q", Kind: "k", MaxAttempts: 100})
	if err != nil {
		t.Fatal(err)
	}
	// claim takes the job (reaping its expired lease first) and returns its
	// lease version and run id.
	claim := func(pool *pgxpool.Pool) (int64, string) {
		t.Helper()
		e := lease.New(pool, lease.JobRuns)
		if _, err := e.ReapExpired(ctx, "q", 10); err != nil {
			t.Fatal(err)
		}
		c, err := e.Claim(ctx, lease.ClaimParams{Queue: "q", Max: 1, Lease: time.Millisecond, WorkerID: "w"})
		if err != nil || len(c.Items) != 1 || c.Items[0].ID != id.ID {
			t.Fatalf("claim: %v, %+v", err, c.Items)
		}
		time.Sleep(2 * time.Millisecond) // the lease expires: the next claim may take it again
		return c.Items[0].LeaseVersion, c.Items[0].RunID.String()
	}
	// token takes the lock and releases it.
	token := func(pool *pgxpool.Pool) int64 {
		t.Helper()
		l, err := lock.TryAcquire(ctx, pool, "epoch-test", lock.Options{TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Token()
	}

	v1, _ := claim(pp)
	t1 := token(pp)
	if v1 != 1 || t1 != 1 {
		t.Fatalf("timeline 1 starts from 1: lease version %d, token %d", v1, t1)
	}
	epochWaitReplayed(t, ctx, pp, standby)

	// Cut the standby off, then use numbers it never sees.
	sp := epochPool(t, ctx, standby.URL("postgres"))
	if _, err := sp.Exec(ctx, "alter system set primary_conninfo = ''"); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Exec(ctx, "select pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	epochEventually(t, 30*time.Second, "the standby disconnected", func() bool {
		var n int
		return pp.QueryRow(ctx, "select count(*) from pg_stat_replication").Scan(&n) == nil && n == 0
	})
	v2, run2 := claim(pp)
	t2 := token(pp)
	if v2 != 2 || t2 != 2 {
		t.Fatalf("second numbers on timeline 1: lease version %d, token %d", v2, t2)
	}

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	primary.Stop() // the old primary is gone, as in a failover
	sp.Reset()     // connections opened during recovery
	var known int64
	if err := sp.QueryRow(ctx, "select lease_version from workq.job_runs_all where id = $1", id.ID).Scan(&known); err != nil || known != 1 {
		t.Fatalf("the promoted standby knows lease version %d (%v), want 1: it must have missed the second claim", known, err)
	}
	v3, run3 := claim(sp)
	t3 := token(sp)
	for _, c := range []struct {
		what     string
		old, new int64
	}{{"lease version", v2, v3}, {"lock token", t2, t3}} {
		if c.new <= c.old {
			t.Errorf("%s went from %d on timeline 1 to %d on timeline 2: not strictly greater", c.what, c.old, c.new)
		}
		if ha.Timeline(c.new) != 2 || c.new != 1<<32 {
			t.Errorf("%s %d on timeline 2: want 1<<32 (timeline 2 in the high bits)", c.what, c.new)
		}
	}
	if run3 == run2 {
		t.Errorf("run id %s handed out on both timelines", run3)
	}
	// And they keep growing by one on the new timeline.
	if v4, _ := claim(sp); v4 != v3+1 {
		t.Errorf("next lease version %d, want %d", v4, v3+1)
	}
	if t4 := token(sp); t4 != t3+1 {
		t.Errorf("next token %d, want %d", t4, t3+1)
	}
}

// Every statement of db/queries that sets a lease_version or a lock token
// takes the fencing epoch into account (greatest(old + 1, (select
// workq.workq_epoch()))): a new bump site that forgets it fails here.
func TestFencingBumpsCarryTheEpoch(t *testing.T) {
	files, err := filepath.Glob("../db/queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries: %v", err)
	}
	assign := regexp.MustCompile(`(?m)\b(lease_version|token)\s*=\s*[^,\n]*\+\s*1[^\n]*`)
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range assign.FindAllString(string(b), -1) {
			found++
			if !strings.Contains(m, "greatest(") || !strings.Contains(m, "(select workq.workq_epoch())") {
				t.Errorf("%s: %q bumps a fencing number without the epoch", filepath.Base(f), m)
			}
		}
	}
	if found < 8 {
		t.Errorf("found %d bump sites, want at least 8 (claims of the four tables, claim by id, revive, cancel, lock)", found)
	}
}

// epochPool opens a small pool configured as workq's commands configure theirs.
func epochPool(t *testing.T, ctx context.Context, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	ha.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func epochMigrateUp(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	m, err := migrate.New(pool, migrate.Options{})
	if err != nil {
		return 0, err
	}
	return m.Up(ctx)
}

// epochWaitReplayed waits until the standby has replayed everything the primary
// wrote so far.
func epochWaitReplayed(t *testing.T, ctx context.Context, primary *pgxpool.Pool, standby *pgembed.Server) {
	t.Helper()
	var lsn string
	if err := primary.QueryRow(ctx, "select pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	epochEventually(t, 30*time.Second, "the standby replayed "+lsn, func() bool {
		var ok bool
		return primary.QueryRow(ctx, "select coalesce(bool_and(replay_lsn >= $1::pg_lsn), false) from pg_stat_replication where application_name = $2",
			lsn, standby.Name()).Scan(&ok) == nil && ok
	})
}

// epochEventually polls cond every 20ms until it holds, failing the test after
// timeout.
func epochEventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s has not happened", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
