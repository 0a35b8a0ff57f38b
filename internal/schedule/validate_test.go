package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

func TestValidationWritesNothing(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	st := schedule.NewStore(schedule.StoreOptions{})
	ok := schedule.Spec{Name: "ok", Cron: "*/5 * * * *", Kind: "k"}
	for _, tc := range []struct {
		name string
		edit func(*schedule.Spec)
		want string
	}{
		{"bad cron", func(s *schedule.Spec) { s.Cron = "61 * * * *" }, "cron"},
		{"too many fields", func(s *schedule.Spec) { s.Cron = "* * * * * * * *" }, "cron"},
		{"empty cron", func(s *schedule.Spec) { s.Cron = " " }, "empty"},
		{"never fires", func(s *schedule.Spec) { s.Cron = "0 0 30 2 *" }, "never fires"},
		{"TZ prefix", func(s *schedule.Spec) { s.Cron = "CRON_TZ=Europe/Berlin 0 3 * * *" }, "timezone"},
		{"every below a second", func(s *schedule.Spec) { s.Cron = "@every 500ms" }, "whole number of seconds"},
		{"every not a duration", func(s *schedule.Spec) { s.Cron = "@every often" }, "Go duration"},
		{"unknown descriptor", func(s *schedule.Spec) { s.Cron = "@fortnightly" }, "cron"},
		{"unknown zone", func(s *schedule.Spec) { s.Timezone = "Mars/Olympus" }, "unknown time zone"},
		{"Local zone", func(s *schedule.Spec) { s.Timezone = "Local" }, "IANA"},
		{"bad name", func(s *schedule.Spec) { s.Name = "has space" }, "schedule name"},
		{"empty name", func(s *schedule.Spec) { s.Name = "" }, "schedule name"},
		{"bad queue", func(s *schedule.Spec) { s.Queue = "a/b" }, "queue"},
		{"no kind", func(s *schedule.Spec) { s.Kind = "" }, "kind"},
		{"array payload", func(s *schedule.Spec) { s.Payload = json.RawMessage(`[1]`) }, "JSON object"},
		{"invalid payload", func(s *schedule.Spec) { s.Payload = []byte(`{`) }, "not valid JSON"},
		{"max attempts", func(s *schedule.Spec) { s.MaxAttempts = 1001 }, "max attempts"},
		{"overlap", func(s *schedule.Spec) { s.Overlap = "sometimes" }, "overlap"},
		{"misfire", func(s *schedule.Spec) { s.Misfire = "later" }, "misfire"},
		{"misfire cap", func(s *schedule.Spec) { s.MisfireCap = 10001 }, "misfire cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := ok
			tc.edit(&sp)
			_, err := st.Create(ctx, pool, sp)
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: %v, want ErrInvalid mentioning %q", err, tc.want)
			}
			if verr := st.Validate(sp); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate: %v, Create: %v", verr, err)
			}
			if n := count(t, pool); n != 0 {
				t.Errorf("%d schedules written", n)
			}
		})
	}
	if _, err := st.Create(ctx, pool, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, pool, ok); !errors.Is(err, schedule.ErrExists) {
		t.Errorf("duplicate name: %v, want ErrExists", err)
	}
	before, err := st.Get(ctx, pool, "ok")
	if err != nil {
		t.Fatal(err)
	}
	bad, zone, empty := "not a cron", "Nowhere/Else", ""
	for _, c := range []schedule.Changes{{Cron: &bad}, {Timezone: &zone}, {Kind: &empty}, {Payload: "a string"}} {
		if _, err := st.Update(ctx, pool, "ok", c); !errors.Is(err, workqtype.ErrInvalid) {
			t.Errorf("update %+v: %v, want ErrInvalid", c, err)
		}
	}
	after, err := st.Get(ctx, pool, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.Cron != before.Cron || after.Timezone != before.Timezone {
		t.Errorf("rejected updates changed the schedule: %+v", after)
	}
	if _, err := st.Update(ctx, pool, "missing", schedule.Changes{}); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("update missing: %v", err)
	}
	if _, err := st.Enable(ctx, pool, "missing"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("enable missing: %v", err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from workq.schedules`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
