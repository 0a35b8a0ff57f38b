package workq

import "github.com/workq/workq/workqtype"

// The schedule types of the Client's schedule methods and of PeriodicJob
// (defined in workqtype, which every package shares). docs/schedules.md
// describes every field and policy.
type (
	// ScheduleSpec describes a cron schedule to create (CreateSchedule;
	// PeriodicJob.Spec makes one of typed args).
	ScheduleSpec = workqtype.ScheduleSpec
	// ScheduleChanges is a partial update (UpdateSchedule): nil fields
	// stay as they are.
	ScheduleChanges = workqtype.ScheduleChanges
	// Schedule is a stored schedule (GetSchedule, ListSchedules, ...).
	Schedule = workqtype.Schedule
	// TriggeredRun is the job run TriggerSchedule enqueued.
	TriggeredRun = workqtype.TriggeredRun
	// OverlapPolicy says whether a slot runs while the schedule's previous
	// run is live.
	OverlapPolicy = workqtype.OverlapPolicy
	// MisfirePolicy says what becomes of slots found more than the
	// scheduler's grace late.
	MisfirePolicy = workqtype.MisfirePolicy
)

// The overlap and misfire policies.
const (
	OverlapAllow   = workqtype.OverlapAllow   // every slot gets its run (the default)
	OverlapSkip    = workqtype.OverlapSkip    // a slot is skipped while the previous run is live
	MisfireRunOnce = workqtype.MisfireRunOnce // missed slots collapse into one run (the default)
	MisfireSkip    = workqtype.MisfireSkip    // missed slots are dropped
	MisfireRunAll  = workqtype.MisfireRunAll  // every missed slot runs, the latest MisfireCap of them
)

// Schedule errors. Not-found is ErrNotFound.
var (
	// ErrScheduleExists: CreateSchedule of a name taken, or a PeriodicJob
	// of the name of a schedule an operator created.
	ErrScheduleExists = workqtype.ErrScheduleExists
	// ErrScheduleOverlap: TriggerSchedule without force found the previous
	// run live and the overlap policy is skip.
	ErrScheduleOverlap = workqtype.ErrScheduleOverlap
)
