package maintain

import "time"

// The defaults of the maintenance's settings, written once: a zero field
// of workq.MaintenanceConfig takes them, and the CLI's flags show them.
const (
	DefaultLeaderTTL         = 15 * time.Second   // a dead leader is replaced within it
	DefaultReapInterval      = 5 * time.Second    // expired leases are requeued this often
	DefaultReapBatch         = 200                // rows per reap statement
	DefaultRetainFinished    = 7 * 24 * time.Hour // done and failed items are deleted this long after they ended
	DefaultRetainRuns        = 7 * 24 * time.Hour // archived attempts are deleted this long after they ended
	DefaultRetentionInterval = time.Minute        // how often retention, stuck-item flagging and the inbox window run
	DefaultInboxWindow       = 7 * 24 * time.Hour // processed inbox messages are remembered this long
	DefaultScheduleInterval  = time.Second        // how often due schedule slots become job runs
	DefaultVacuumInterval    = 10 * time.Second   // how often the work tables' dead tuples are checked (VacuumTask)
)
