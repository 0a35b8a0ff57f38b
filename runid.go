package workq

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// ParseRunID reads a run id (Job.RunID, Message.RunID, Attempt.RunID, the
// run_id of the logs and the runs directory's RUN_ID, as a UUID string)
// back into the item it is an attempt of and the lease version of the
// claim that started the attempt. A run id is derived from those, not
// drawn at random, so this needs no database; the ref has no shard (a run
// id names an item of one shard, like an id). The attempt's number is in
// the run archive: the Attempt of Client.Attempts(ref) with this RunID.
// Any other text, or a UUID that is not a workq run id, is an error
// matching ErrInvalid.
func ParseRunID(runID string) (ref ItemRef, leaseVersion int64, err error) {
	u, err := uuid.Parse(runID)
	if err != nil {
		return ItemRef{}, 0, workqtype.Invalid("run_id", fmt.Sprintf("%q is not a UUID", runID))
	}
	t, id, v, ok := lease.ParseRunID(u)
	if !ok {
		return ItemRef{}, 0, workqtype.Invalid("run_id", fmt.Sprintf("%s is not a workq run id", u))
	}
	return ItemRef{Table: t, ID: id}, v, nil
}
