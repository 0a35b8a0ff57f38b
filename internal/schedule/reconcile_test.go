package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// stored is what a reconcile test checks of a schedule.
type stored struct {
	cron     string
	enabled  bool
	declared bool
	payload  string
}

func storedOf(t *testing.T, st *schedule.Store, pool *pgxpool.Pool) map[string]stored {
	t.Helper()
	all, err := st.List(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stored{}
	for _, s := range all {
		if s.Enabled != (s.NextRunAt != nil) {
			t.Errorf("schedule %s: enabled %v with next run %v", s.Name, s.Enabled, s.NextRunAt)
		}
		out[s.Name] = stored{s.Cron, s.Enabled, s.Declared, strings.ReplaceAll(string(s.Payload), " ", "")}
	}
	return out
}

func decl(name, cron string) schedule.Spec {
	return schedule.Spec{Name: name, Cron: cron, Kind: "periodic.test"}
}

func fmtRes(r schedule.Reconciled) string {
	return fmt.Sprintf("superseded=%v applied=%v created=%v updated=%v disabled=%v enabled=%v",
		r.Superseded, r.Applied, r.Created, r.Updated, r.Disabled, r.Enabled)
}

// The rules of Reconcile, step by step on one schema: each step is one
// process's reconcile of its declarations (a deploy's set), in order.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	st := schedule.NewStore(schedule.StoreOptions{})
	mustCreate(t, st, pool, schedule.Spec{Name: "op", Cron: "@hourly", Kind: "operator"}) // an operator's
	withPayload := decl("b", "@daily")
	withPayload.Payload = map[string]any{"n": 1}
	v1 := []schedule.Spec{decl("a", "@hourly"), decl("b", "@daily")}
	v2 := []schedule.Spec{decl("c", "@hourly"), decl("a", "*/5 * * * *")} // a changed, b removed, c added
	v3 := []schedule.Spec{decl("a", "*/5 * * * *"), withPayload}          // b back with a payload, c removed
	op := stored{"@hourly", true, false, "{}"}
	steps := []struct {
		name  string
		specs []schedule.Spec
		res   string // fmtRes; "" with err
		err   error
		want  map[string]stored
	}{
		{"v1 creates its schedules", v1,
			"superseded=false applied=true created=[a b] updated=[] disabled=[] enabled=[]", nil,
			map[string]stored{"a": {"@hourly", true, true, "{}"}, "b": {"@daily", true, true, "{}"}, "op": op}},
		{"a second v1 process: the set is applied already", []schedule.Spec{v1[1], v1[0]},
			"superseded=false applied=false created=[] updated=[] disabled=[] enabled=[]", nil,
			map[string]stored{"a": {"@hourly", true, true, "{}"}, "b": {"@daily", true, true, "{}"}, "op": op}},
		{"v2 updates, disables and creates", v2,
			"superseded=false applied=true created=[c] updated=[a] disabled=[b] enabled=[]", nil,
			map[string]stored{"a": {"*/5 * * * *", true, true, "{}"}, "b": {"@daily", false, true, "{}"}, "c": {"@hourly", true, true, "{}"}, "op": op}},
		{"the v1 process still running does not flip them back", v1,
			"superseded=true applied=false created=[] updated=[] disabled=[] enabled=[]", nil,
			map[string]stored{"a": {"*/5 * * * *", true, true, "{}"}, "b": {"@daily", false, true, "{}"}, "c": {"@hourly", true, true, "{}"}, "op": op}},
		{"a declaration of an operator's schedule changes nothing", append(slices.Clone(v3), decl("op", "@daily")),
			"", schedule.ErrExists,
			map[string]stored{"a": {"*/5 * * * *", true, true, "{}"}, "b": {"@daily", false, true, "{}"}, "c": {"@hourly", true, true, "{}"}, "op": op}},
		{"v3 re-enables b with its new payload and disables c", v3,
			"superseded=false applied=true created=[] updated=[] disabled=[c] enabled=[b]", nil,
			map[string]stored{"a": {"*/5 * * * *", true, true, "{}"}, "b": {"@daily", true, true, `{"n":1}`}, "c": {"@hourly", false, true, "{}"}, "op": op}},
		{"no declarations at all disable every declared schedule", []schedule.Spec{},
			"superseded=false applied=true created=[] updated=[] disabled=[a b] enabled=[]", nil,
			map[string]stored{"a": {"*/5 * * * *", false, true, "{}"}, "b": {"@daily", false, true, `{"n":1}`}, "c": {"@hourly", false, true, "{}"}, "op": op}},
	}
	for _, s := range steps {
		res, err := st.Reconcile(ctx, pool, s.specs, time.Hour)
		switch {
		case s.err != nil && !errors.Is(err, s.err):
			t.Fatalf("%s: err %v, want %v", s.name, err, s.err)
		case s.err == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.err == nil && fmtRes(res) != s.res:
			t.Errorf("%s:\n got %s\nwant %s", s.name, fmtRes(res), s.res)
		}
		if got := storedOf(t, st, pool); !mapsEqual(got, s.want) {
			t.Errorf("%s: stored\n got %v\nwant %v", s.name, got, s.want)
		}
	}
}

func mapsEqual(a, b map[string]stored) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An operator's change to a declared schedule (disable, update) holds
// while the same set is reconciled again (another replica, a restart);
// the next deploy's set, which declares it enabled, enables it again.
func TestReconcileKeepsOperatorChangesUntilTheNextSet(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	st := schedule.NewStore(schedule.StoreOptions{})
	v1 := []schedule.Spec{decl("a", "@hourly")}
	if _, err := st.Reconcile(ctx, pool, v1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Disable(ctx, pool, "a"); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Reconcile(ctx, pool, v1, time.Hour); err != nil || res.Applied {
		t.Fatalf("v1 again: %s, %v; want nothing applied", fmtRes(res), err)
	}
	if got := storedOf(t, st, pool)["a"]; got.enabled {
		t.Fatalf("a after v1 again: %+v, want still disabled", got)
	}
	res, err := st.Reconcile(ctx, pool, append(slices.Clone(v1), decl("b", "@daily")), time.Hour)
	if err != nil || fmtRes(res) != "superseded=false applied=true created=[b] updated=[] disabled=[] enabled=[a]" {
		t.Fatalf("v2: %s, %v", fmtRes(res), err)
	}
}

// A rollback: v2's processes stop and v1's run again. While v2 is alive v1
// is superseded; once v2 has not been seen for its alive window, v1 (first
// seen earlier, but the newest alive set) is applied again.
func TestReconcileRollbackAppliesOnceTheNewerSetIsGone(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	st := schedule.NewStore(schedule.StoreOptions{})
	v1 := []schedule.Spec{decl("a", "@hourly")}
	v2 := []schedule.Spec{decl("a", "@daily")}
	if _, err := st.Reconcile(ctx, pool, v1, time.Second); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Reconcile(ctx, pool, v2, time.Second); err != nil || !res.Applied {
		t.Fatalf("v2: %s, %v", fmtRes(res), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := st.Reconcile(ctx, pool, v1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Superseded {
			if fmtRes(res) != "superseded=false applied=true created=[] updated=[a] disabled=[] enabled=[]" {
				t.Fatalf("v1 after v2 is gone: %s", fmtRes(res))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("v1 still superseded 30s after v2's last reconcile")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := storedOf(t, st, pool)["a"]; got.cron != "@hourly" || !got.enabled {
		t.Fatalf("a after the rollback: %+v", got)
	}
}

// Two processes of two sets reconciling at the same moment agree: one set
// ends applied, the other superseded or applied first and then replaced,
// never a mix of the two.
func TestReconcileConcurrentSetsAgree(t *testing.T) {
	ctx := context.Background()
	pool := testdb.PoolWith(t, 8)
	st := schedule.NewStore(schedule.StoreOptions{})
	sets := [][]schedule.Spec{
		{decl("a", "@hourly"), decl("b", "@hourly")},
		{decl("a", "@daily"), decl("c", "@daily")},
	}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := st.Reconcile(ctx, pool, sets[i%2], time.Hour)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := storedOf(t, st, pool)
	on := map[string]string{}
	for name, s := range got {
		if s.enabled {
			on[name] = s.cron
		}
	}
	a := fmt.Sprint(on)
	if a != "map[a:@hourly b:@hourly]" && a != "map[a:@daily c:@daily]" {
		t.Fatalf("enabled schedules after concurrent reconciles: %s, want exactly one set's", a)
	}
}

func TestReconcileInvalid(t *testing.T) {
	st := schedule.NewStore(schedule.StoreOptions{})
	for _, tc := range []struct {
		name  string
		specs []schedule.Spec
		want  string
	}{
		{"twice", []schedule.Spec{decl("a", "@hourly"), decl("a", "@daily")}, "declared twice"},
		{"bad cron", []schedule.Spec{decl("a", "nonsense")}, "cron"},
		{"no kind", []schedule.Spec{{Name: "a", Cron: "@hourly"}}, "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Fingerprint(tc.specs)
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	// The fingerprint ignores order and spelled-out defaults.
	f1, err1 := st.Fingerprint([]schedule.Spec{decl("a", "@hourly"), decl("b", "@daily")})
	b := decl("b", "@daily")
	b.Timezone, b.Queue, b.MaxAttempts, b.Overlap = "UTC", "default", 4, schedule.OverlapAllow
	f2, err2 := st.Fingerprint([]schedule.Spec{b, decl("a", "@hourly")})
	if err1 != nil || err2 != nil || string(f1) != string(f2) {
		t.Fatalf("fingerprints differ: %x %v, %x %v", f1, err1, f2, err2)
	}
}
