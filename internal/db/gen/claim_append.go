package gen

// Hand-written, not generated: sqlc has no mode that fills a slice the
// caller passes. TestJobRunsClaimAppendMatchesGenerated keeps its arguments
// and scanned columns those of the generated JobRunsClaim.

import "context"

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
	for rows.Next() {
		dst = append(dst, JobRunsClaimRow{})
		i := &dst[len(dst)-1]
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
