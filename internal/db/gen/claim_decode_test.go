package gen_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// claimShaped selects rows shaped as JobRunsClaim's (the same types, kind
// through the workq_name domain as the table has it), one per case.
const claimShaped = `
select v.id::bigint, v.kind::workq.workq_name, v.payload::jsonb, v.priority::smallint,
       v.run_at::timestamptz, v.attempts::integer, v.max_attempts::integer,
       v.lease_version::bigint, v.locked_until::timestamptz, v.created_at::timestamptz,
       v.metadata::jsonb, v.limit_key::text
from (values
  (1, 'email', '{"to": "a@b.c"}', 0, '2026-12-07 10:00:00.123456+00', 1, 4, 7, '2026-12-07 10:00:30+00', '2026-12-07 09:59:59.999999+00', null, null),
  (9223372036854775807, 'email', '{}', -32768, '0001-01-01 00:00:00+00', 0, 1000, -1, null, '9999-12-31 23:59:59.999999+00', '{"k": [1, "é"]}', 'tenant-1'),
  (-5, 'Other.kind:v-2', '[1, 2, 3]', 32767, '1969-12-31 23:59:59.5+00', 2147483647, 1, 0, '1999-12-31 23:59:59.999999+00', '2000-01-01 00:00:00+00', 'null', ''),
  (2, 'email', '"s"', 1, 'infinity', 1, 1, 1, null, '2026-01-01+00', null, null),
  (3, 'other', '{}', 1, '2026-01-01+00', 1, 1, 1, '-infinity', '2026-01-01+00', null, null),
  (4, 'other', '{}', 1, '4713-11-24 BC+00', 1, 1, 1, null, '2026-01-01+00', null, null)
) v(id, kind, payload, priority, run_at, attempts, max_attempts, lease_version, locked_until, created_at, metadata, limit_key)
where $1::bigint is null or v.id = $1
order by v.id`

var claimShapedIDs = []int64{-5, 1, 2, 3, 4, 9223372036854775807}

func scanClaimRow(rows pgx.Rows, r *gen.JobRunsClaimRow) error {
	return rows.Scan(&r.ID, &r.Kind, &r.Payload, &r.Priority, &r.RunAt, &r.Attempts, &r.MaxAttempts,
		&r.LeaseVersion, &r.LockedUntil, &r.CreatedAt, &r.Metadata, &r.LimitKey)
}

// The fast decode of the claim's rows makes what rows.Scan makes, and
// leaves to it what it does not read: infinite timestamps (which Scan
// refuses) and years outside 1..9999 (which it reads).
func TestClaimRowDecodeMatchesScan(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	decoded, declined := 0, 0
	for _, id := range claimShapedIDs { // a row each: a failed Scan ends its rows
		rows, err := pool.Query(ctx, claimShaped, id)
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatalf("row %d: none: %v", id, rows.Err())
		}
		if !gen.ClaimRowsDecodable(rows) {
			t.Fatalf("the claim's columns are not decodable: %+v", rows.FieldDescriptions())
		}
		var fast, scanned gen.JobRunsClaimRow
		ok := gen.DecodeClaimRow(rows.RawValues(), &fast)
		err = scanClaimRow(rows, &scanned)
		rows.Close()
		switch {
		case ok && err != nil:
			t.Errorf("row %d decoded, but rows.Scan fails: %v", id, err)
		case ok:
			decoded++
			if !reflect.DeepEqual(fast, scanned) {
				t.Errorf("row %d: decoded\n%+v\nscanned\n%+v", id, fast, scanned)
			}
		default: // left to rows.Scan, as JobRunsClaimAppend does
			declined++
		}
	}
	if decoded != 3 || declined != 3 {
		t.Errorf("decoded %d rows and declined %d, want 3 and 3", decoded, declined)
	}
}

// A pool that decodes timestamps into another location, or has its own
// codec for a column's type, gets rows.Scan's rows: the fast decode is not
// used. A connection without them (none) is decodable: the others fail for
// their registrations, not for the query.
func TestClaimRowsNotDecodableWithOtherCodecs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		register  func(m *pgtype.Map)
		decodable bool
	}{
		{"none", func(*pgtype.Map) {}, true},
		{"scan location", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		}, false},
		{"own jsonb codec", func(m *pgtype.Map) {
			m.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONCodec{}})
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, testdb.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			c.register(conn.TypeMap())
			rows, err := conn.Query(ctx, claimShaped, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			if !rows.Next() {
				t.Fatal("no rows", rows.Err())
			}
			if got := gen.ClaimRowsDecodable(rows); got != c.decodable {
				t.Errorf("decodable %v, want %v", got, c.decodable)
			}
		})
	}
}

// The claim statement's own rows take the fast decode: a change to its
// columns that the decode does not read fails here rather than quietly
// sending every claim through rows.Scan. And JobRunsClaimAppend makes the
// rows the generated JobRunsClaim makes: both run in one transaction (one
// now()), the first rolled back to a savepoint.
func TestJobRunsClaimIsDecodable(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (kind, payload, metadata, limit_key, priority) values
		('k', '{"n": 1}', '{"a": 1}', 'key', 1), ('other', '{}', null, null, 0), ('k', '[2]', null, 'key2', 0)`); err != nil {
		t.Fatal(err)
	}
	token := pgtype.UUID{Bytes: [16]byte{1}, Valid: true}
	rows, err := pool.Query(ctx, gen.JobRunsClaimSQL, token, int64(30000), "w", "default", int32(1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("the claim returned no row: %v", rows.Err())
	}
	if !gen.ClaimRowsDecodable(rows) {
		t.Fatalf("JobRunsClaim's rows are not decodable: %+v", rows.FieldDescriptions())
	}
	rows.Close()
	if _, err := pool.Exec(ctx, `update workq.job_runs set status = 0, owner_token = null, locked_until = null`); err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	q := gen.New(tx)
	params := gen.JobRunsClaimParams{OwnerToken: token.Bytes, LeaseMs: 30000, WorkerID: "w", Queue: "default", MaxRows: 10}
	if _, err := tx.Exec(ctx, "savepoint s"); err != nil {
		t.Fatal(err)
	}
	appended, err := q.JobRunsClaimAppend(ctx, params, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "rollback to savepoint s"); err != nil {
		t.Fatal(err)
	}
	generated, err := q.JobRunsClaim(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(appended) != 3 || !reflect.DeepEqual(appended, generated) {
		t.Errorf("JobRunsClaimAppend:\n%+v\nJobRunsClaim:\n%+v", appended, generated)
	}
}
