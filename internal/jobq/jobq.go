// Package jobq enqueues job runs: validation, payload encoding, NOTIFY
// debouncing, the enqueue statements and the COPY path. The Client of
// package workq, the HTTP API and the CLI enqueue through it. Enqueue on a
// pool, or inside the caller's own pgx transaction: the job exists if and
// only if that transaction commits.
package jobq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/internal/db/gen"
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
	Unique      Unique        // the zero value: not unique; not with DedupKey
	// Metadata is stored with the job (job_runs.metadata, with the
	// enqueuing span's trace context) for its handler, the API and the
	// dashboard; see workqtype.EncodeMetadata for its limits.
	Metadata map[string]string
	// LimitKey is the key per-key flow limits and fair claims count the
	// job by (job_runs.limit_key): a tenant, a customer, a downstream
	// account. 1 to MaxLimitKey bytes of UTF-8 without NUL; "" for none
	// (stored as null).
	LimitKey string
}

// MaxLimitKey is the longest Job.LimitKey, in bytes.
const MaxLimitKey = 256

// Enqueued is the outcome of enqueuing one job.
type Enqueued struct {
	ID        int64
	Duplicate bool // a run already held the dedup or unique key; ID is that run
}

// Client enqueues jobs. It is safe for concurrent use; share one per process
// so NOTIFY debouncing works across goroutines.
type Client struct {
	maxAttempts int
	maxPayload  int
	notify      *notify.Debouncer
	tracer      trace.Tracer
	propagator  propagation.TextMapPropagator
	now         func() time.Time
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
	// Now is the clock of unique jobs' periods (Unique.ByPeriod). Nil:
	// time.Now.
	Now func() time.Time
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
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{maxAttempts: o.MaxAttempts, maxPayload: o.MaxPayloadBytes, notify: notify.New(o.NotifyDebounce),
		tracer: otelx.Tracer(o.TracerProvider), propagator: otelx.Propagator(o.Propagator), now: o.Now}
}

// startEnqueue starts the span of one enqueue call of n jobs on queue (""
// for several) and returns the trace context its jobs carry (empty when
// the span is not recording).
func (c *Client) startEnqueue(ctx context.Context, queue, kind string, n int) (context.Context, trace.Span, traceContext) {
	ctx, span := otelx.StartEnqueue(ctx, c.tracer, "job_runs", queue, kind, n)
	fields := otelx.Inject(ctx, c.propagator)
	tc := traceContext{fields: fields}
	if fields != nil {
		tc.json, _ = json.Marshal(fields) // a map of strings always encodes
	}
	return ctx, span, tc
}

// traceContext is the enqueuing span's trace context: its fields and their
// JSON object, both nil without one.
type traceContext struct {
	fields map[string]string
	json   []byte
}

// metadata returns the job_runs.metadata of p: its metadata with the trace
// context added (otelx.WithTrace), or nil when it has neither.
func (p *prepared) metadata(tc traceContext) []byte {
	if p.meta == nil {
		return tc.json
	}
	if tc.fields == nil {
		return p.metaJSON
	}
	b, err := json.Marshal(otelx.WithTrace(p.meta, tc.fields, 0))
	if err != nil { // a map of strings always encodes
		return p.metaJSON
	}
	return b
}

type prepared struct {
	queue, kind, dedup string
	limitKey           string // "": none
	payload            []byte
	priority           int16
	runAt              *time.Time
	delayMs            int64
	maxAttempts        int32
	uniqueKey          []byte // nil: not unique
	uniqueStates       int16
	meta               map[string]string // nil: none
	metaJSON           []byte
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
	if err := workqtype.CheckKey("limit_key", "limit key", j.LimitKey, MaxLimitKey); err != nil {
		return p, err
	}
	p.limitKey = j.LimitKey
	if p.delayMs, p.runAt, err = workqtype.Delay(j.Delay, j.RunAt); err != nil {
		return p, err
	}
	if p.maxAttempts, err = workqtype.MaxAttempts("max_attempts", j.MaxAttempts, c.maxAttempts); err != nil {
		return p, err
	}
	if p.metaJSON, err = workqtype.EncodeMetadata("metadata", j.Metadata); err != nil {
		return p, err
	}
	if p.metaJSON != nil {
		p.meta = j.Metadata
	}
	if !j.Unique.IsZero() {
		if p.dedup != "" {
			return p, workqtype.Invalid("unique", "give a dedup key or unique options, not both")
		}
		if p.uniqueKey, p.uniqueStates, err = j.Unique.key(&p, c.now()); err != nil {
			return p, err
		}
	}
	return p, nil
}

// MaxPayloadBytes is the payload limit of c's jobs, with its default.
func (c *Client) MaxPayloadBytes() int { return c.maxPayload }

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
	ctx, span, tc := c.startEnqueue(ctx, p.queue, p.kind, 1)
	defer func() {
		if span.IsRecording() && err == nil {
			span.SetAttributes(otelx.AttrID.Int64(res.ID))
		}
		otelx.End(span, err)
	}()
	q := gen.New(db)
	notify, metadata := c.shouldNotify(p.queue), p.metadata(tc)
	// The insert and the fallback read of the run holding the key share one
	// snapshot: if that run committed after it was taken, neither sees a
	// row, and a new statement (new snapshot) settles it.
	for try := 0; ; try++ {
		id, inserted, err := enqueueOne(ctx, q, &p, notify, metadata)
		if err == nil {
			return Enqueued{ID: id, Duplicate: !inserted}, nil
		}
		if !isNoRows(err) || try == 5 {
			return Enqueued{}, fmt.Errorf("enqueue %s/%s: %w", p.queue, p.kind, err)
		}
	}
}

// enqueueOne runs the statement that enqueues p: JobRunsEnqueueUnique for
// a unique job, else JobRunsEnqueue.
func enqueueOne(ctx context.Context, q *gen.Queries, p *prepared, notify bool, metadata []byte) (id int64, inserted bool, err error) {
	if p.uniqueKey != nil {
		row, err := q.JobRunsEnqueueUnique(ctx, gen.JobRunsEnqueueUniqueParams{
			Queue: p.queue, Kind: p.kind, Payload: p.payload, Priority: p.priority,
			RunAt: p.runAt, DelayMs: p.delayMs, MaxAttempts: p.maxAttempts,
			Notify: notify, Metadata: metadata, UniqueKey: p.uniqueKey, UniqueStates: p.uniqueStates,
			LimitKey: p.limitKeyArg(),
		})
		return row.ID, row.Inserted, err
	}
	arg := gen.JobRunsEnqueueParams{
		Queue: p.queue, Kind: p.kind, Payload: p.payload, Priority: p.priority,
		RunAt: p.runAt, DelayMs: p.delayMs, MaxAttempts: p.maxAttempts,
		Notify: notify, Metadata: metadata, LimitKey: p.limitKeyArg(),
	}
	if p.dedup != "" {
		arg.DedupKey = &p.dedup
	}
	row, err := q.JobRunsEnqueue(ctx, arg)
	return row.ID, row.Inserted, err
}

// limitKeyArg is p's limit key as a statement's argument: nil (null) for
// none, never "".
func (p *prepared) limitKeyArg() *string {
	if p.limitKey == "" {
		return nil
	}
	return &p.limitKey
}

// EnqueueMany adds many job runs in one statement on db. The result has one
// entry per job, in order. A batch may have jobs with dedup keys or unique
// jobs, not both (they are skipped by different statements).
func (c *Client) EnqueueMany(ctx context.Context, db DB, jobs []Job) (_ []Enqueued, err error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	n := len(jobs)
	rows := make([]prepared, n)
	dedupAt, uniqueAt := -1, -1 // the first job with a dedup key, a unique one
	hasMeta, hasLimitKey := false, false
	for i, j := range jobs {
		p, err := c.prepare(j)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		if p.runAt != nil {
			return nil, fmt.Errorf("job %d: %w", i, workqtype.Invalid("run_at", "EnqueueMany takes Delay, not RunAt"))
		}
		if p.dedup != "" && dedupAt < 0 {
			dedupAt = i
		}
		if p.uniqueKey != nil && uniqueAt < 0 {
			uniqueAt = i
		}
		if dedupAt >= 0 && uniqueAt >= 0 {
			return nil, fmt.Errorf("job %d: %w", max(dedupAt, uniqueAt), workqtype.Invalid("unique", fmt.Sprintf(
				"job %d has a dedup key and job %d is unique: one batch takes one or the other (enqueue them in two batches)", dedupAt, uniqueAt)))
		}
		hasMeta = hasMeta || p.meta != nil
		hasLimitKey = hasLimitKey || p.limitKey != ""
		rows[i] = p
	}
	ctx, span, tc := c.startEnqueue(ctx, sameQueue(jobs), "", n)
	defer func() { otelx.End(span, err) }()
	b := batchOf(rows)
	if hasMeta || tc.json != nil {
		// Without metadata the array stays empty: unnest pads it with nulls.
		b.metadatas = make([]string, n)
		for i := range rows {
			b.metadatas[i] = string(rows[i].metadata(tc))
		}
	}
	if hasLimitKey {
		// Likewise: a batch without limit keys sends an empty array.
		b.limitKeys = make([]string, n)
		for i := range rows {
			b.limitKeys[i] = rows[i].limitKey
		}
	}
	for _, queue := range b.queues {
		if c.shouldNotify(queue) {
			b.notify = true
		}
	}
	q := gen.New(db)
	switch {
	case uniqueAt >= 0:
		return b.enqueueUnique(ctx, q, rows)
	case dedupAt >= 0:
		return b.enqueueDedup(ctx, q, rows)
	}
	ids, err := q.JobRunsEnqueueManyPlain(ctx, gen.JobRunsEnqueueManyPlainParams{
		Queues: b.queues, Kinds: b.kinds, Payloads: b.payloads, Priorities: b.priorities,
		DelaysMs: b.delaysMs, MaxAttempts: b.maxAttempts, Notify: b.notify, Metadatas: b.metadatas, LimitKeys: b.limitKeys,
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

// batch holds the columns of an EnqueueMany statement.
type batch struct {
	queues, kinds, payloads, metadatas []string
	limitKeys                          []string // empty when no row has a limit key
	priorities                         []int16
	delaysMs                           []int64
	maxAttempts                        []int32
	notify                             bool
}

func batchOf(rows []prepared) batch {
	n := len(rows)
	b := batch{queues: make([]string, n), kinds: make([]string, n), payloads: make([]string, n),
		priorities: make([]int16, n), delaysMs: make([]int64, n), maxAttempts: make([]int32, n)}
	for i := range rows {
		p := &rows[i]
		b.queues[i], b.kinds[i], b.payloads[i] = p.queue, p.kind, string(p.payload)
		b.priorities[i], b.delaysMs[i], b.maxAttempts[i] = p.priority, p.delayMs, p.maxAttempts
	}
	return b
}

func (b *batch) enqueueDedup(ctx context.Context, q *gen.Queries, rows []prepared) ([]Enqueued, error) {
	keys := make([]string, len(rows))
	for i := range rows {
		keys[i] = rows[i].dedup
	}
	got, err := q.JobRunsEnqueueMany(ctx, gen.JobRunsEnqueueManyParams{
		Queues: b.queues, Kinds: b.kinds, Payloads: b.payloads, Priorities: b.priorities, DelaysMs: b.delaysMs,
		MaxAttempts: b.maxAttempts, DedupKeys: keys, Notify: b.notify, Metadatas: b.metadatas, LimitKeys: b.limitKeys,
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue %d jobs: %w", len(rows), err)
	}
	inserted := make([]keyedID, len(got))
	for i, r := range got {
		inserted[i] = keyedID{r.ID, deref(r.DedupKey)}
	}
	return settle(keys, inserted, func(keys []string) ([]keyedID, error) {
		live, err := q.JobRunsLiveByDedupKeys(ctx, keys)
		return keyedIDs(live, err, func(r gen.JobRunsLiveByDedupKeysRow) keyedID { return keyedID{r.ID, deref(r.DedupKey)} })
	}, func(keys []string) ([]keyedID, error) {
		latest, err := q.JobRunsLatestByDedupKeys(ctx, keys)
		return keyedIDs(latest, err, func(r gen.JobRunsLatestByDedupKeysRow) keyedID { return keyedID{r.ID, deref(r.DedupKey)} })
	})
}

func (b *batch) enqueueUnique(ctx context.Context, q *gen.Queries, rows []prepared) ([]Enqueued, error) {
	keys := make([]string, len(rows))
	byteKeys := make([][]byte, len(rows))
	states := make([]int16, len(rows))
	for i := range rows {
		keys[i], byteKeys[i], states[i] = string(rows[i].uniqueKey), rows[i].uniqueKey, rows[i].uniqueStates
	}
	got, err := q.JobRunsEnqueueManyUnique(ctx, gen.JobRunsEnqueueManyUniqueParams{
		Queues: b.queues, Kinds: b.kinds, Payloads: b.payloads, Priorities: b.priorities, DelaysMs: b.delaysMs,
		MaxAttempts: b.maxAttempts, UniqueKeys: byteKeys, UniqueStates: states, Notify: b.notify, Metadatas: b.metadatas,
		LimitKeys: b.limitKeys,
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue %d jobs: %w", len(rows), err)
	}
	inserted := make([]keyedID, len(got))
	for i, r := range got {
		inserted[i] = keyedID{r.ID, string(r.UniqueKey)}
	}
	return settle(keys, inserted, func(keys []string) ([]keyedID, error) {
		holding, err := q.JobRunsHoldingUniqueKeys(ctx, toBytes(keys))
		return keyedIDs(holding, err, func(r gen.JobRunsHoldingUniqueKeysRow) keyedID { return keyedID{r.ID, string(r.UniqueKey)} })
	}, func(keys []string) ([]keyedID, error) {
		latest, err := q.JobRunsLatestByUniqueKeys(ctx, toBytes(keys))
		return keyedIDs(latest, err, func(r gen.JobRunsLatestByUniqueKeysRow) keyedID { return keyedID{r.ID, string(r.UniqueKey)} })
	})
}

// keyedID is a run and the key ("" for none) it was inserted with or holds.
type keyedID struct {
	id  int64
	key string
}

func keyedIDs[R any](rows []R, err error, f func(R) keyedID) ([]keyedID, error) {
	if err != nil {
		return nil, err
	}
	out := make([]keyedID, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out, nil
}

func toBytes(keys []string) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k)
	}
	return out
}

// settle maps the rows a keyed batch inserted (in input order, minus the
// inputs whose key a run held, or an earlier input of the batch took) onto
// the inputs, whose keys are keys ("" for none), and finds the runs that
// hold the duplicates' keys: with holding, or, for a run that left its
// key's states between the insert and that lookup (it was the duplicate
// all the same), with latest.
func settle(keys []string, inserted []keyedID, holding, latest func([]string) ([]keyedID, error)) ([]Enqueued, error) {
	out := make([]Enqueued, len(keys))
	seenKey := map[string]bool{}
	var dupKeys []string
	r := 0
	for i, key := range keys {
		if r < len(inserted) && inserted[r].key == key && (key == "" || !seenKey[key]) {
			out[i] = Enqueued{ID: inserted[r].id}
			r++
		} else {
			out[i] = Enqueued{Duplicate: true}
			dupKeys = append(dupKeys, key)
		}
		if key != "" {
			seenKey[key] = true
		}
	}
	if len(dupKeys) == 0 {
		return out, nil
	}
	byKey := map[string]int64{}
	for _, lookup := range []func([]string) ([]keyedID, error){holding, latest} {
		found, err := lookup(dupKeys)
		if err != nil {
			return nil, fmt.Errorf("look up duplicates: %w", err)
		}
		for _, f := range found {
			if byKey[f.key] == 0 {
				byKey[f.key] = f.id
			}
		}
		dupKeys = dupKeys[:0]
		for i := range out {
			if out[i].Duplicate && out[i].ID == 0 {
				if out[i].ID = byKey[keys[i]]; out[i].ID == 0 {
					dupKeys = append(dupKeys, keys[i])
				}
			}
		}
		if len(dupKeys) == 0 {
			break
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
