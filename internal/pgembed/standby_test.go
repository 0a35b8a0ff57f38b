package pgembed

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A standby follows its primary (synchronously with Sync), and Promote turns
// it into a primary on the next timeline, which the WAL insert position's
// file name shows at once, before any checkpoint: the timeline workq's
// fencing epoch (migration 00021) reads.
func TestStandbyPromote(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "sync"}[sync], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p, err := Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			sb, err := p.StartStandby(ctx, StandbyOptions{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Stop()
			query := func(s *Server, sql string) string {
				t.Helper()
				conn, err := pgx.Connect(ctx, s.URL("postgres"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				var out string
				if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				return out
			}
			wantState := map[bool]string{false: "async", true: "sync"}[sync]
			if got := query(p, "select sync_state from pg_stat_replication where application_name = '"+sb.ApplicationName()+"'"); got != wantState {
				t.Fatalf("sync_state = %q, want %q", got, wantState)
			}
			if got := query(sb, "select pg_is_in_recovery()::text"); got != "true" {
				t.Fatalf("standby in recovery = %s", got)
			}
			const timeline = "select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"
			if got := query(p, timeline); got != "00000001" {
				t.Fatalf("primary timeline %s", got)
			}
			if err := sb.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			if got := query(sb, timeline); got != "00000002" {
				t.Fatalf("promoted standby's insert timeline from pg_walfile_name = %s, want 00000002", got)
			}
			if got := query(sb, "select timeline_id::text from pg_control_checkpoint()"); got != "2" {
				t.Logf("pg_control_checkpoint().timeline_id = %s right after promote (a checkpoint has not finished)", got)
			}
		})
	}
}
