package workqtype

import (
	"encoding/json"
	"errors"
	"time"
)

// Sentinel errors of schedules. Neither request changed anything.
var (
	// ErrScheduleExists: a schedule of that name exists already (create),
	// or was created by an operator where code declares a periodic job of
	// that name.
	ErrScheduleExists = errors.New("schedule already exists")
	// ErrScheduleOverlap: a trigger found the schedule's previous run still
	// live and the schedule's overlap policy is skip.
	ErrScheduleOverlap = errors.New("schedule has a live run")
)

// OverlapPolicy says whether a schedule's slot runs while the previous run
// of the same schedule is still live (ready or in progress).
type OverlapPolicy string

const (
	OverlapAllow OverlapPolicy = "allow" // every slot gets its run (the default)
	OverlapSkip  OverlapPolicy = "skip"  // a slot is skipped while the previous run is live
)

// MisfirePolicy says what the scheduler does with a schedule's slots it
// finds more than its grace late, after downtime or falling behind.
type MisfirePolicy string

const (
	MisfireRunOnce MisfirePolicy = "run_once" // the missed slots collapse into one run (the default)
	MisfireSkip    MisfirePolicy = "skip"     // missed slots are dropped; the next on-time slot runs
	MisfireRunAll  MisfirePolicy = "run_all"  // every missed slot runs, the latest MisfireCap of them
)

// DefaultMisfireCap is a schedule's MisfireCap when it sets none: under
// misfire policy run_all, at most this many missed slots run.
const DefaultMisfireCap = 100

// ScheduleSpec describes a cron schedule to create: its slots become job
// runs of Kind on Queue. docs/schedules.md describes every field.
type ScheduleSpec struct {
	Name        string        // required, unique: 1-128 of A-Z a-z 0-9 _ . : -
	Cron        string        // required: five fields, or a macro such as @hourly or @every 10m
	Timezone    string        // IANA zone; "" is UTC
	Queue       string        // "" is "default"
	Kind        string        // required: the job kind its runs have
	Payload     any           // a JSON object: struct, map, json.RawMessage or []byte; nil is {}
	Priority    int16         // of its runs
	MaxAttempts int           // of its runs; 0 is 4
	Overlap     OverlapPolicy // "" is allow
	Misfire     MisfirePolicy // "" is run_once
	MisfireCap  int           // run_all's cap; 0 is 100, at most 10000
	Disabled    bool          // create it disabled
}

// ScheduleChanges is a partial update of a schedule: nil fields stay as
// they are.
type ScheduleChanges struct {
	Cron        *string
	Timezone    *string
	Queue       *string
	Kind        *string
	Payload     any // nil: unchanged
	Priority    *int16
	MaxAttempts *int
	Overlap     *OverlapPolicy
	Misfire     *MisfirePolicy
	MisfireCap  *int
}

// Schedule is a stored schedule.
type Schedule struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int16           `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	Overlap     OverlapPolicy   `json:"overlap"`
	Misfire     MisfirePolicy   `json:"misfire"`
	MisfireCap  int             `json:"misfire_cap"`
	Enabled     bool            `json:"enabled"`
	// Declared: the schedule is a periodic job declared in code
	// (Config.PeriodicJobs), which the Client reconciles at Start; false
	// for a schedule an operator created (API, CLI, CreateSchedule), which
	// workq never changes on its own.
	Declared  bool       `json:"declared"`
	NextRunAt *time.Time `json:"next_run_at"` // nil while disabled or parked
	LastRunAt *time.Time `json:"last_run_at"` // scheduled time of the last slot run, or when it was triggered
	LastRunID *int64     `json:"last_run_id"`
	// LastOutcome: "" (never ran), "skipped" (the newest slot was skipped by
	// the overlap policy), or the last run's state: "ready", "running",
	// "done", "failed", "cancelled", or "removed" (retention deleted it).
	LastOutcome   string     `json:"last_outcome"`
	SkippedRuns   int64      `json:"skipped_runs"`
	LastSkippedAt *time.Time `json:"last_skipped_at"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// TriggeredRun is the job run a schedule's trigger enqueued.
type TriggeredRun struct {
	RunID int64 `json:"run_id"`
}
