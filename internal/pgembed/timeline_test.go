package pgembed

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A promoted standby's WAL insert timeline shows in pg_walfile_name at
// once, before any checkpoint: the timeline workq's fencing epoch
// (migration 00021, workq_epoch()) reads.
func TestPromotedTimelineInWalfileName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	sb, err := p.StartStandby(ctx, StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	timeline := func(s *Server) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var out string
		if err := conn.QueryRow(ctx, "select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)").Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := timeline(p); got != "00000001" {
		t.Fatalf("primary timeline %s", got)
	}
	if err := sb.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if got := timeline(sb); got != "00000002" {
		t.Fatalf("promoted standby's insert timeline from pg_walfile_name = %s, want 00000002", got)
	}
}
