package gen

// Hand-written, not generated: sqlc has no mode that fills a slice the
// caller passes, nor one that decodes a hot query's rows without pgx's scan
// plans. TestJobRunsClaimAppendMatchesGenerated keeps its arguments and
// scanned columns those of the generated JobRunsClaim;
// TestClaimRowDecodeMatchesScan keeps the fast decode's rows those of
// rows.Scan.

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// JobRunsClaimAppend runs JobRunsClaim, appending its rows to dst. The
// claim loop passes a slice kept between claims: the generated method grows
// a new one by appending, about 800 bytes a row over a claim of 1,000
// (docs/throughput.md, "The client's allocations").
func (q *Queries) JobRunsClaimAppend(ctx context.Context, arg JobRunsClaimParams, dst []JobRunsClaimRow) ([]JobRunsClaimRow, error) {
	rows, err := q.db.Query(ctx, jobRunsClaim,
		arg.OwnerToken,
		arg.LeaseMs,
		arg.WorkerID,
		arg.Queue,
		arg.MaxRows,
		arg.ResumePriority,
		arg.ResumeRunAt,
	)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	var cache claimCache
	for first, fast := true, false; rows.Next(); first = false {
		if first { // the columns are described with the first row
			fast = claimRowsDecodable(rows)
		}
		dst = append(dst, JobRunsClaimRow{})
		i := &dst[len(dst)-1]
		if fast && decodeClaimRow(rows.RawValues(), i, &cache) {
			continue
		}
		*i = JobRunsClaimRow{}
		if err := rows.Scan(
			&i.ID,
			&i.Kind,
			&i.Payload,
			&i.Priority,
			&i.RunAt,
			&i.Attempts,
			&i.MaxAttempts,
			&i.LeaseVersion,
			&i.LockedUntil,
			&i.CreatedAt,
			&i.Metadata,
			&i.LimitKey,
		); err != nil {
			return dst[:len(dst)-1], err
		}
	}
	return dst, rows.Err()
}

// The claim's columns as PostgreSQL describes them (a domain, as kind's
// workq_name, is described as its base type) and the result formats pgx
// asks for with its default codecs: the only shape decodeClaimRow reads.
var claimColumns = [...]struct {
	oid    uint32
	format int16
}{
	{pgtype.Int8OID, pgtype.BinaryFormatCode},        // id
	{pgtype.TextOID, pgtype.TextFormatCode},          // kind
	{pgtype.JSONBOID, pgtype.TextFormatCode},         // payload
	{pgtype.Int2OID, pgtype.BinaryFormatCode},        // priority
	{pgtype.TimestamptzOID, pgtype.BinaryFormatCode}, // run_at
	{pgtype.Int4OID, pgtype.BinaryFormatCode},        // attempts
	{pgtype.Int4OID, pgtype.BinaryFormatCode},        // max_attempts
	{pgtype.Int8OID, pgtype.BinaryFormatCode},        // lease_version
	{pgtype.TimestamptzOID, pgtype.BinaryFormatCode}, // locked_until
	{pgtype.TimestamptzOID, pgtype.BinaryFormatCode}, // created_at
	{pgtype.JSONBOID, pgtype.TextFormatCode},         // metadata
	{pgtype.TextOID, pgtype.TextFormatCode},          // limit_key
}

// claimRowsDecodable reports whether decodeClaimRow may read the rows (asked
// once a row has arrived, as pgx has their description only then): the
// columns are the claim's, in the formats it reads, and the connection
// decodes them with pgx's default codecs (an application's pool may
// register its own, or scan timestamps into another location). Otherwise
// every row goes through rows.Scan. What it does not see: scan-plan
// wrappers an application adds to its type map (pgtype.Map's
// TryWrapScanPlanFuncs, e.g. one that makes every *time.Time UTC), which
// rows.Scan would apply to these columns and the decode does not; the
// claim's rows are the runtime's, not the application's, so only their
// values matter.
//
// Why not always rows.Scan: its scan plans (an interface call and a type
// switch per column, a reflect lookup per pointer) were 0.6 µs of the
// worker's ~6.5 µs of CPU per job in a burn-down (docs/throughput.md).
func claimRowsDecodable(rows pgx.Rows) bool {
	fds := rows.FieldDescriptions()
	if len(fds) != len(claimColumns) || rows.Conn() == nil {
		return false
	}
	m := rows.Conn().TypeMap()
	for i, c := range claimColumns {
		if fds[i].DataTypeOID != c.oid || fds[i].Format != c.format {
			return false
		}
		t, ok := m.TypeForOID(c.oid)
		if !ok {
			return false
		}
		switch codec := t.Codec.(type) {
		case pgtype.Int2Codec, pgtype.Int4Codec, pgtype.Int8Codec, pgtype.TextCodec, *pgtype.JSONBCodec:
		case *pgtype.TimestamptzCodec:
			if codec.ScanLocation != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// claimCache keeps the last kind and lease deadline decoded: a claim's
// rows are mostly of a few kinds and share one locked_until, and a string
// and a *time.Time per row were two allocations per job. Rows of one claim
// may share their LockedUntil pointer: nothing writes through it.
type claimCache struct {
	kind  string
	until *time.Time
}

func (k *claimCache) kindOf(b []byte) string {
	if string(b) != k.kind { // compared without allocating
		k.kind = string(b)
	}
	return k.kind
}

func (k *claimCache) untilOf(t time.Time) *time.Time {
	if k.until == nil || !k.until.Equal(t) { // both local (timeOf)
		k.until = &t
	}
	return k.until
}

// decodeClaimRow fills r from one row's raw values, as rows.Scan would.
// It reports false, leaving r partly filled, for a value it does not read
// (a NULL in a column that is never NULL, an infinite or out-of-range
// timestamp, a value of the wrong length): the caller then scans the row,
// which returns the error rows.Scan would.
func decodeClaimRow(v [][]byte, r *JobRunsClaimRow, cache *claimCache) bool {
	if len(v) != len(claimColumns) {
		return false
	}
	var ok bool
	if r.ID, ok = int8Of(v[0]); !ok || v[1] == nil || v[2] == nil {
		return false
	}
	r.Kind = cache.kindOf(v[1])
	r.Payload = bytesOf(v[2])
	if len(v[3]) != 2 {
		return false
	}
	r.Priority = int16(binary.BigEndian.Uint16(v[3]))
	if r.RunAt, ok = timeOf(v[4]); !ok {
		return false
	}
	if len(v[5]) != 4 || len(v[6]) != 4 {
		return false
	}
	r.Attempts = int32(binary.BigEndian.Uint32(v[5]))
	r.MaxAttempts = int32(binary.BigEndian.Uint32(v[6]))
	if r.LeaseVersion, ok = int8Of(v[7]); !ok {
		return false
	}
	if v[8] != nil {
		t, ok := timeOf(v[8])
		if !ok {
			return false
		}
		r.LockedUntil = cache.untilOf(t)
	}
	if r.CreatedAt, ok = timeOf(v[9]); !ok {
		return false
	}
	r.Metadata = bytesOf(v[10])
	if v[11] != nil {
		s := string(v[11])
		r.LimitKey = &s
	}
	return true
}

func int8Of(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// bytesOf copies a value (the raw values are the connection's buffer,
// reused by the next row); NULL is nil.
func bytesOf(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// PostgreSQL's binary timestamptz: microseconds since 2000-01-01 UTC. The
// time is in the local location, as pgx's codec makes it (ScanLocation
// nil). Infinity and years outside 1..9999 are left to rows.Scan.
const (
	y2kUnixMicros = 946_684_800 * 1_000_000
	minMicros     = -63_082_281_600 * 1_000_000             // 0001-01-01 from 2000-01-01
	maxMicros     = 253_402_300_799_999_999 - y2kUnixMicros // 9999-12-31 23:59:59.999999
)

func timeOf(b []byte) (time.Time, bool) {
	us, ok := int8Of(b)
	if !ok || us < minMicros || us > maxMicros {
		return time.Time{}, false
	}
	us += y2kUnixMicros
	return time.Unix(us/1_000_000, us%1_000_000*1_000), true
}
