// Package jobq enqueues job runs: validation, payload encoding, NOTIFY
// debouncing, the enqueue statements and the COPY path. The Client of
// package workq, the HTTP API and the CLI enqueue through it. Enqueue on a
// pool, or inside the caller's own pgx transaction: the job exists if and
// only if that transaction commits.
package jobq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/db/gen"
	"github.com/workq/workq/internal/notify"
	"github.com/workq/workq/internal/otelx"
	"github.com/workq/workq/workqtype"
)

// DB is what enqueue runs on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB = workqtype.DB

// ErrInvalid wraps every validation error: the request changed nothing.
var ErrInvalid = workqtype.ErrInvalid

// Job describes a job run to enqueue.
type Job struct {
	Queue       string        // default "default"
	Kind        string        // required: selects the handler
	Payload     any           // a JSON object: a struct or map to marshal, or raw JSON as json.RawMessage or []byte; nil means {}
	Priority    int16         // higher runs first
	RunAt       time.Time     // not before this time (zero: now + Delay)
	Delay       time.Duration // not before now + Delay (measured on the database clock)
	MaxAttempts int           // 0: the client default (4)
	DedupKey    string        // while a run with this key is ready or running, enqueue returns it instead
}

// Enqueued is the outcome of enqueuing one job.
type Enqueued struct {
	ID        int64
	Duplicate bool // a live run already held the dedup key; ID is that run
}

// Client enqueues jobs. It is safe for concurrent use; share one per process
// so NOTIFY debouncing works across goroutines.
type Client struct {
	maxAttempts int
	maxPayload  int
	notify      *notify.Debouncer
	tracer      trace.Tracer
	propagator  propagation.TextMapPropagator
}

// Options configure a Client; zero values take the defaults.
type Options struct {
	MaxAttempts    int           // default max attempts of jobs that do not set one (4)
	NotifyDebounce time.Duration // at most one NOTIFY per queue per this (5ms); negative disables NOTIFY
	// MaxPayloadBytes limits a job's payload, in bytes of JSON text: 0 means
	// workqtype.DefaultMaxPayload (1 MiB), at most workqtype.MaxPayloadCeiling
	// (256 MiB). There is no "unlimited": a negative or larger value makes
	// every Validate and Enqueue fail with an error wrapping ErrInvalid.
	MaxPayloadBytes int
	// TracerProvider makes the enqueue spans (workq.enqueue): every
	// enqueue call is one span, and while it is recording each job run
	// stores its trace context (job_runs.metadata) for the handler's span
	// to continue. Nil: the global provider (otel.SetTracerProvider), which
	// records nothing until one is set.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into the job. Nil: the global
	// propagator if one is set, else W3C trace context.
	Propagator propagation.TextMapPropagator
}

// New returns a Client.
func New(o Options) *Client {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = workqtype.DefaultMaxAttempts
	}
	if o.NotifyDebounce == 0 {
		o.NotifyDebounce = workqtype.DefaultNotifyDebounce
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = workqtype.DefaultMaxPayload
	}
	return &Client{maxAttempts: o.MaxAttempts, maxPayload: o.MaxPayloadBytes, notify: notify.New(o.NotifyDebounce),
		tracer: otelx.Tracer(o.TracerProvider), propagator: otelx.Propagator(o.Propagator)}
}

// startEnqueue starts the span of one enqueue call of n jobs on queue (""
// for several) and returns the metadata its jobs carry: the span's trace
// context, or nil when it is not recording.
func (c *Client) startEnqueue(ctx context.Context, queue, kind string, n int) (context.Context, trace.Span, []byte) {
	ctx, span := otelx.StartEnqueue(ctx, c.tracer, "job_runs", queue, kind, n)
	return ctx, span, otelx.Metadata(ctx, c.propagator)
}

type prepared struct {
	queue, kind, dedup string
	payload            []byte
	priority           int16
	runAt              *time.Time
	delayMs            int64
	maxAttempts        int32
}

func (c *Client) prepare(j Job) (prepared, error) {
	p := prepared{queue: j.Queue, kind: j.Kind, dedup: j.DedupKey, priority: j.Priority}
	if p.queue == "" {
		p.queue = workqtype.DefaultQueue
	}
	if err := workqtype.CheckQueue("queue", p.queue); err != nil {
		return p, err
	}
	if err := workqtype.CheckName("kind", "kind", p.kind); err != nil {
		return p, err
	}
	payload, err := workqtype.EncodePayload(j.Payload, c.maxPayload)
	if err != nil {
		return p, err
	}
	p.payload = payload
	if err := workqtype.CheckKey("dedup_key", "dedup key", p.dedup, 512); err != nil {
		return p, err
	}
	if p.delayMs, p.runAt, err = workqtype.Delay(j.Delay, j.RunAt); err != nil {
		return p, err
	}
	p.maxAttempts, err = workqtype.MaxAttempts("max_attempts", j.MaxAttempts, c.maxAttempts)
	return p, err
}

// Validate reports what is wrong with j (an error wrapping ErrInvalid), or
// nil when Enqueue would accept it. It touches no database.
func (c *Client) Validate(j Job) error {
	_, err := c.prepare(j)
	return err
}

// Enqueue adds one job run on db (a pool, or the caller's transaction).
func (c *Client) Enqueue(ctx context.Context, db DB, j Job) (res Enqueued, err error) {
	p, err := c.prepare(j)
	if err != nil {
		return Enqueued{}, err
	}
	ctx, span, metadata := c.startEnqueue(ctx, p.queue, p.kind, 1)
	defer func() {
		if span.IsRecording() && err == nil {
			span.SetAttributes(otelx.AttrID.Int64(res.ID))
		}
		otelx.End(span, err)
	}()
	q := gen.New(db)
	arg := gen.JobRunsEnqueueParams{
		Queue: p.queue, Kind: p.kind, Payload: p.payload, Priority: p.priority,
		RunAt: p.runAt, DelayMs: p.delayMs, MaxAttempts: p.maxAttempts,
		Notify: c.shouldNotify(p.queue), Metadata: metadata,
	}
	if p.dedup != "" {
		arg.DedupKey = &p.dedup
	}
	// The insert and the fallback read of a live duplicate share one snapshot:
	// if the duplicate committed after it was taken, neither sees a row, and a
	// new statement (new snapshot) settles it.
	for try := 0; ; try++ {
		row, err := q.JobRunsEnqueue(ctx, arg)
		if err == nil {
			return Enqueued{ID: row.ID, Duplicate: !row.Inserted}, nil
		}
		if !isNoRows(err) || try == 5 {
			return Enqueued{}, fmt.Errorf("enqueue %s/%s: %w", p.queue, p.kind, err)
		}
	}
}

// EnqueueMany adds many job runs in one statement on db. The result has one
// entry per job, in order.
func (c *Client) EnqueueMany(ctx context.Context, db DB, jobs []Job) (_ []Enqueued, err error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	n := len(jobs)
	ctx, span, metadata := c.startEnqueue(ctx, sameQueue(jobs), "", n)
	defer func() { otelx.End(span, err) }()
	arg := gen.JobRunsEnqueueManyParams{
		Queues: make([]string, n), Kinds: make([]string, n), Payloads: make([]string, n),
		Priorities: make([]int16, n), DelaysMs: make([]int64, n), MaxAttempts: make([]int32, n), DedupKeys: make([]string, n),
	}
	arg.Metadata = metadata
	queues := map[string]bool{}
	hasKeys := false
	for i, j := range jobs {
		p, err := c.prepare(j)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		if p.runAt != nil {
			return nil, fmt.Errorf("job %d: %w", i, workqtype.Invalid("run_at", "EnqueueMany takes Delay, not RunAt"))
		}
		arg.Queues[i], arg.Kinds[i], arg.Payloads[i] = p.queue, p.kind, string(p.payload)
		arg.Priorities[i], arg.DelaysMs[i], arg.MaxAttempts[i], arg.DedupKeys[i] = p.priority, p.delayMs, p.maxAttempts, p.dedup
		queues[p.queue] = true
		hasKeys = hasKeys || p.dedup != ""
	}
	for queue := range queues {
		if c.shouldNotify(queue) {
			arg.Notify = true
		}
	}
	q := gen.New(db)
	if !hasKeys {
		ids, err := q.JobRunsEnqueueManyPlain(ctx, gen.JobRunsEnqueueManyPlainParams{
			Queues: arg.Queues, Kinds: arg.Kinds, Payloads: arg.Payloads, Priorities: arg.Priorities,
			DelaysMs: arg.DelaysMs, MaxAttempts: arg.MaxAttempts, Notify: arg.Notify, Metadata: arg.Metadata,
		})
		if err != nil {
			return nil, fmt.Errorf("enqueue %d jobs: %w", n, err)
		}
		if len(ids) != n {
			return nil, fmt.Errorf("enqueue %d jobs: %d ids returned", n, len(ids))
		}
		out := make([]Enqueued, n)
		for i, id := range ids {
			out[i] = Enqueued{ID: id}
		}
		return out, nil
	}
	rows, err := q.JobRunsEnqueueMany(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d jobs: %w", n, err)
	}
	// Rows come back in input order, minus inputs whose dedup key was taken.
	out := make([]Enqueued, n)
	seenKey := map[string]bool{}
	var dupKeys []string
	r := 0
	for i := range jobs {
		key := arg.DedupKeys[i]
		if r < len(rows) && deref(rows[r].DedupKey) == key && (key == "" || !seenKey[key]) {
			out[i] = Enqueued{ID: rows[r].ID}
			r++
		} else {
			out[i] = Enqueued{Duplicate: true}
			dupKeys = append(dupKeys, key)
		}
		if key != "" {
			seenKey[key] = true
		}
	}
	if len(dupKeys) > 0 {
		live, err := q.JobRunsLiveByDedupKeys(ctx, dupKeys)
		if err != nil {
			return nil, fmt.Errorf("look up duplicates: %w", err)
		}
		byKey := map[string]int64{}
		for _, l := range live {
			byKey[deref(l.DedupKey)] = l.ID
		}
		var finished []string
		for i := range out {
			if out[i].Duplicate {
				if out[i].ID = byKey[arg.DedupKeys[i]]; out[i].ID == 0 {
					finished = append(finished, arg.DedupKeys[i])
				}
			}
		}
		if len(finished) > 0 {
			// The live run finished between the insert and the lookup: it was
			// the duplicate all the same, so report it.
			latest, err := q.JobRunsLatestByDedupKeys(ctx, finished)
			if err != nil {
				return nil, fmt.Errorf("look up duplicates: %w", err)
			}
			for _, l := range latest {
				byKey[deref(l.DedupKey)] = l.ID
			}
			for i := range out {
				if out[i].Duplicate && out[i].ID == 0 {
					out[i].ID = byKey[arg.DedupKeys[i]]
				}
			}
		}
	}
	return out, nil
}

// shouldNotify reports whether an enqueue on queue should also NOTIFY its
// workers (see notify.Debouncer).
func (c *Client) shouldNotify(queue string) bool { return c.notify.Should(queue) }

// sameQueue returns the queue of jobs when they share one, else "".
func sameQueue(jobs []Job) string {
	q := jobs[0].Queue
	if q == "" {
		q = "default"
	}
	for _, j := range jobs[1:] {
		if j.Queue != q && (j.Queue != "" || q != "default") {
			return ""
		}
	}
	return q
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
