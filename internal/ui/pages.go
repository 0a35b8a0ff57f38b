package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/rundir"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// Limits of what a page shows.
const (
	pageSize      = 50
	maxPayloadOut = 64 << 10 // bytes of a pretty-printed payload shown
	maxLogOut     = 32 << 10 // bytes of an attempt.log shown (its end)
	blockedKeys   = 100      // blocked partition keys per outbox queue
	joinsShown    = 50
)

// badRequest is an error the visitor can fix: its message is shown as it
// is, with status 400 (404 for notFound).
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error {
	return &badRequest{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &badRequest{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// classify maps an error to a status and a message to show.
func classify(err error) (int, string) {
	var b *badRequest
	switch {
	case errors.As(err, &b):
		return b.status, b.msg
	case errors.Is(err, workqtype.ErrInvalid):
		return http.StatusBadRequest, strings.TrimPrefix(err.Error(), workqtype.ErrInvalid.Error()+": ")
	case errors.Is(err, workq.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, workq.ErrScheduleOverlap):
		return http.StatusConflict, err.Error()
	case errors.Is(err, db.ErrSchemaBehind):
		return http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "The request timed out or was cancelled."
	}
	return http.StatusInternalServerError, "Internal error (the server log has the details)."
}

func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, x *session, err error) {
	status, msg := classify(err)
	if status >= 500 {
		h.log.ErrorContext(r.Context(), "dashboard request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	h.fail(w, r, x, status, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func tableOf(r *http.Request) (workq.Table, error) {
	t, ok := parseTable(r.PathValue("table"))
	if !ok {
		return "", notFound("There is no work table %q (%s are).", r.PathValue("table"), tableList())
	}
	return t, nil
}

// queueRow is one row of the overview: the sampled backlog, the attempts
// that ended in the history window, and the live pause and limit.
type queueRow struct {
	Table       workq.Table `json:"table"`
	Queue       string      `json:"queue"`
	Ready       int64       `json:"ready"`
	Scheduled   int64       `json:"scheduled"`
	InProgress  int64       `json:"in_progress"`
	OldestReady float64     `json:"oldest_ready_seconds"`
	Failed      int64       `json:"failed"`
	Done1h      int64       `json:"done_window"`
	Failed1h    int64       `json:"failed_window"`
	Retried1h   int64       `json:"retried_window"`
	Paused      bool        `json:"paused"`
	PausedBy    string      `json:"paused_by,omitempty"`
	Limit       *int32      `json:"limit"`
	// PausedShards are the shards where a queue of a sharded dashboard is
	// paused, when it is not paused on all; ShardLimits is each shard's
	// budget ("eu 5, us 5": a sharded queue has no single W).
	PausedShards []string `json:"paused_shards,omitempty"`
	ShardLimits  string   `json:"shard_limits,omitempty"`
}

// overviewData is the overview's content (also its JSON, polled).
type overviewData struct {
	SampledAt *time.Time `json:"sampled_at"`
	Since     *time.Time `json:"since"` // the oldest sample: the window of the *_window counts
	Interval  float64    `json:"interval_seconds"`
	Error     string     `json:"error,omitempty"` // of the last sampling round
	Queues    []queueRow `json:"queues"`
	NoSampler bool       `json:"-"`
	Sharded   bool       `json:"-"`
	// Shards is the per-shard breakdown of a sharded dashboard's latest
	// sample: each shard's totals, or why it was left out.
	Shards []shardRow `json:"shards,omitempty"`
	// NoQueueState says which shards' pauses and limits are missing (a
	// sharded dashboard's shards that did not answer).
	NoQueueState string `json:"no_queue_state,omitempty"`
}

// shardRow is one shard in the overview's breakdown.
type shardRow struct {
	Shard       string     `json:"shard"`
	Unreachable string     `json:"unreachable,omitempty"` // why the latest sample left it out
	SampledAt   *time.Time `json:"sampled_at"`            // its last successful sample
	Queues      int        `json:"queues"`
	Ready       int64      `json:"ready"`
	Scheduled   int64      `json:"scheduled"`
	InProgress  int64      `json:"in_progress"`
	Failed      int64      `json:"failed"`
}

func (h *Handler) overviewOf(ctx context.Context) (overviewData, error) {
	rows := map[QueueKey]*queueRow{}
	row := func(k QueueKey) *queueRow {
		if rows[k] == nil {
			rows[k] = &queueRow{Table: k.Table, Queue: k.Queue}
		}
		return rows[k]
	}
	out := overviewData{Sharded: h.sharded()}
	if h.o.Sampler == nil {
		out.NoSampler = true
	} else {
		samples, err := h.o.Sampler.Samples()
		if err != nil {
			out.Error = "The last sample failed: " + err.Error()
		}
		out.Interval = h.o.Sampler.Interval().Seconds()
		if n := len(samples); n > 0 {
			at, since := samples[n-1].At, samples[0].At
			out.SampledAt, out.Since = &at, &since
			for k, q := range samples[n-1].Queues {
				r := row(k)
				r.Ready, r.Scheduled, r.InProgress, r.Failed = q.Ready, q.Scheduled, q.InProgress, q.Failed
				r.OldestReady = q.OldestDue.Seconds()
			}
			for k, byOutcome := range endedIn(samples) {
				r := row(k)
				r.Done1h, r.Failed1h, r.Retried1h = byOutcome["done"], byOutcome["failed"], byOutcome["retry"]
			}
		}
		for _, st := range h.o.Sampler.ShardStates() {
			sr := shardRow{Shard: st.Name, Queues: st.Queues, Ready: st.Ready, Scheduled: st.Scheduled, InProgress: st.InProgress, Failed: st.Failed}
			if !st.SampledAt.IsZero() {
				at := st.SampledAt
				sr.SampledAt = &at
			}
			if st.Err != nil {
				sr.Unreachable = "did not answer"
				if !errors.Is(st.Err, context.DeadlineExceeded) {
					sr.Unreachable = "could not be read (the server log has the error)"
				}
			}
			out.Shards = append(out.Shards, sr)
		}
	}
	if !h.sharded() {
		ctl, err := h.client.QueueControls(ctx)
		if err != nil {
			return out, err
		}
		for _, c := range ctl {
			r := row(QueueKey{c.Table, c.Queue})
			if c.Paused {
				r.Paused, r.PausedBy = true, c.PausedBy
			}
			if c.Limit != nil {
				w := int32(*c.Limit)
				r.Limit = &w
			}
		}
	} else {
		h.shardQueueState(ctx, row, &out)
	}
	out.Queues = make([]queueRow, 0, len(rows))
	for _, r := range rows {
		out.Queues = append(out.Queues, *r)
	}
	sort.Slice(out.Queues, func(i, j int) bool {
		return keyLess(QueueKey{out.Queues[i].Table, out.Queues[i].Queue}, QueueKey{out.Queues[j].Table, out.Queues[j].Queue})
	})
	return out, nil
}

// shardQueueState sets the pauses and limits of a sharded dashboard's
// rows from every shard (Client.EachShard, each bounded by the shard
// timeout): a queue is paused when it is paused on some shard
// (PausedShards says where, when not on all), and its limit is each
// shard's budget (ShardLimits). The shards that did not answer are named
// in NoQueueState.
func (h *Handler) shardQueueState(ctx context.Context, row func(QueueKey) *queueRow, out *overviewData) {
	var mu sync.Mutex
	per := map[string][]workq.QueueControl{}
	failed := h.client.EachShard(ctx, h.o.ShardTimeout, func(ctx context.Context, sc *workq.Client) error {
		ctl, err := sc.QueueControls(ctx)
		if err == nil {
			mu.Lock()
			per[sc.ShardName()] = ctl
			mu.Unlock()
		}
		return err
	})
	limits := map[QueueKey][]string{}
	pausedAt := map[QueueKey]bool{}
	for _, name := range h.shards {
		for _, c := range per[name] {
			k := QueueKey{c.Table, c.Queue}
			r := row(k)
			if c.Paused {
				pausedAt[k] = true
				r.Paused = true
				r.PausedShards = append(r.PausedShards, name)
				if r.PausedBy == "" {
					r.PausedBy = c.PausedBy
				}
			}
			if c.Limit != nil {
				limits[k] = append(limits[k], fmt.Sprintf("%s %d", name, *c.Limit))
			}
		}
	}
	for k, ls := range limits {
		row(k).ShardLimits = strings.Join(ls, ", ")
	}
	for k := range pausedAt {
		if r := row(k); len(r.PausedShards) == len(h.shards) {
			r.PausedShards = nil // everywhere
		}
	}
	var notes []string
	for _, n := range h.notices(ctx, failed) {
		notes = append(notes, fmt.Sprintf("The pauses and limits of shard %s are not shown: it %s.", n.Shard, n.Error))
	}
	out.NoQueueState = strings.Join(notes, " ")
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, x *session) error {
	d, err := h.overviewOf(r.Context())
	if err != nil {
		return err
	}
	h.render(w, r, x, http.StatusOK, "overview", "Overview", "overview", d)
	return nil
}

func (h *Handler) overviewJSON(w http.ResponseWriter, r *http.Request, _ *session) error {
	d, err := h.overviewOf(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// historyJSON is the charts' data: ?table=&queue= selects one (table,
// queue), a table alone all its queues, nothing every queue.
func (h *Handler) historyJSON(w http.ResponseWriter, r *http.Request, _ *session) error {
	q := r.URL.Query()
	tbl, queue := q.Get("table"), q.Get("queue")
	if tbl != "" {
		if _, ok := parseTable(tbl); !ok {
			return bad("table %q: want %s", tbl, tableList())
		}
	}
	if h.o.Sampler == nil {
		writeJSON(w, http.StatusOK, SeriesOf(nil, 0, nil))
		return nil
	}
	samples, _ := h.o.Sampler.Samples()
	s := SeriesOf(samples, h.o.Sampler.Interval(), func(k QueueKey) bool {
		return (tbl == "" || string(k.Table) == tbl) && (queue == "" || k.Queue == queue)
	})
	writeJSON(w, http.StatusOK, s)
	return nil
}

// counts is the page of exact counts: Client.ListQueues reads every row.
func (h *Handler) counts(w http.ResponseWriter, r *http.Request, x *session) error {
	start := time.Now()
	type row struct {
		Shard string
		Q     workq.QueueInfo
	}
	d := struct {
		Queues  []row
		Took    time.Duration
		Sharded bool
		Down    []shardNotice
	}{Sharded: h.sharded()}
	if !h.sharded() {
		qs, err := h.client.ListQueues(r.Context())
		if err != nil {
			return err
		}
		for _, q := range qs {
			d.Queues = append(d.Queues, row{Q: q})
		}
	} else {
		// Every shard at once; one that does not answer a one-item page
		// within the shard timeout is a notice, not a failed page. The
		// counts themselves read whole tables: only the request bounds them.
		var mu sync.Mutex
		failed := h.client.EachShard(r.Context(), 0, func(ctx context.Context, sc *workq.Client) error {
			pctx, cancel := context.WithTimeout(ctx, h.o.ShardTimeout)
			_, err := sc.List(pctx, workq.ListParams{Limit: 1})
			cancel()
			if err != nil {
				return err
			}
			qs, err := sc.ListQueues(ctx)
			mu.Lock()
			defer mu.Unlock()
			for _, q := range qs {
				d.Queues = append(d.Queues, row{Shard: sc.ShardName(), Q: q})
			}
			return err
		})
		sort.SliceStable(d.Queues, func(i, j int) bool {
			a, b := d.Queues[i], d.Queues[j]
			if a.Q.Table != b.Q.Table || a.Q.Queue != b.Q.Queue {
				return keyLess(QueueKey{a.Q.Table, a.Q.Queue}, QueueKey{b.Q.Table, b.Q.Queue})
			}
			return a.Shard < b.Shard
		})
		d.Down = h.notices(r.Context(), failed)
	}
	d.Took = time.Since(start)
	h.render(w, r, x, http.StatusOK, "counts", "Exact counts", "overview", d)
	return nil
}

// filterForm is the items page's filter as its form fields.
type filterForm struct {
	Queue, Status, Kind, CreatedAfter, CreatedBefore, Error string
	Shard                                                   string // one shard of a sharded dashboard ("": every one)
}

var filterNames = []string{"shard", "queue", "status", "kind", "created_after", "created_before", "error"}

// timeForm is the layout of a datetime-local field (UTC).
const timeForm = "2006-01-02T15:04"

// parseFilter reads the filter fields of a query or a form into the
// Client's ListParams of table t; times are datetime-local fields in UTC
// (RFC 3339 too). The Client checks the rest (checkFilter).
func parseFilter(t workq.Table, v url.Values) (workq.ListParams, filterForm, error) {
	ff := filterForm{Queue: strings.TrimSpace(v.Get("queue")), Status: v.Get("status"), Kind: strings.TrimSpace(v.Get("kind")),
		CreatedAfter: v.Get("created_after"), CreatedBefore: v.Get("created_before"), Error: v.Get("error"), Shard: v.Get("shard")}
	p := workq.ListParams{Table: t, Queue: ff.Queue, Kind: ff.Kind, ErrorText: ff.Error}
	if ff.Status != "" {
		p.States = []string{ff.Status}
	}
	var err error
	if p.CreatedAfter, err = parseFormTime("created after", ff.CreatedAfter); err != nil {
		return p, ff, err
	}
	if p.CreatedBefore, err = parseFormTime("created before", ff.CreatedBefore); err != nil {
		return p, ff, err
	}
	return p, ff, nil
}

// checkFilter has the Client check p (a one-item page): nil, or the
// error of a bad filter (ErrInvalid). A shard that does not answer is no
// error here.
func (h *Handler) checkFilter(ctx context.Context, p workq.ListParams) error {
	p.Limit, p.AllowPartial = 1, true
	ctx, cancel := context.WithTimeout(ctx, h.o.ShardTimeout)
	defer cancel()
	if _, err := h.client.List(ctx, p); errors.Is(err, workq.ErrInvalid) {
		return err
	}
	return nil
}

func parseFormTime(what, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{timeForm, timeForm + ":05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, bad("%s: %q is not a time (want YYYY-MM-DDTHH:MM in UTC)", what, s)
}

// query is the filter as a query string (for links and the next page).
func (ff filterForm) query() url.Values {
	v := url.Values{}
	for name, val := range map[string]string{"queue": ff.Queue, "status": ff.Status, "kind": ff.Kind,
		"created_after": ff.CreatedAfter, "created_before": ff.CreatedBefore, "error": ff.Error, "shard": ff.Shard} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return v
}

// Fields are the filter's fields that are set, by name.
func (ff filterForm) Fields() map[string]string {
	out := map[string]string{}
	for k, v := range ff.query() {
		out[k] = v[0]
	}
	return out
}

// QueryString is the filter as a query string, as a template.URL: an
// href's query would otherwise escape its = and & again.
func (ff filterForm) QueryString() template.URL { return template.URL(ff.query().Encode()) }

// Any reports whether a filter field is set.
func (ff filterForm) Any() bool { return len(ff.query()) > 0 }

type itemsData struct {
	Table    workq.Table
	Tables   []workq.Table
	Filter   filterForm
	Statuses []string
	Items    []workq.Item
	Next     template.URL // query string of the next page ("" on the last), encoded by url.Values

	First  bool          // this is the first page
	Self   string        // this page, relative to the root (the actions' way back)
	Error  string        // a bad filter
	Text   bool          // the page searched last_error (bounded)
	Shards []string      // the shards of a sharded dashboard (none: unsharded)
	Down   []shardNotice // shards left out of this page
}

// statuses are the states the items page filters by.
var statuses = []string{"ready", "in_progress", "done", "failed", "cancelled", "pending"}

func (h *Handler) items(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	d := itemsData{Table: t, Tables: workq.Tables(), Statuses: statuses, Shards: h.shardList()}
	p, ff, err := parseFilter(t, q)
	d.Filter = ff
	status := http.StatusOK
	if err == nil {
		err = h.list(r.Context(), p, ff, q.Get("cursor"), &d)
	}
	if err != nil {
		var br *badRequest
		if !errors.As(err, &br) && !errors.Is(err, workq.ErrInvalid) {
			return err
		}
		if br != nil && br.status != http.StatusBadRequest {
			return err
		}
		d.Error, status = messageOf(err), http.StatusBadRequest
		d.Items, d.Next, d.Down = []workq.Item{}, "", nil
	}
	d.Self = "items/" + string(t)
	if r.URL.RawQuery != "" {
		d.Self += "?" + r.URL.RawQuery
	}
	h.render(w, r, x, status, "items", tableTitle(t), string(t), d)
	return nil
}

// list fills d with a page of the items p selects, through Client.List:
// of one shard (the filter's, or the one database), its cursor that
// shard's position (an id), or of every shard of a sharded dashboard, the
// Client's merged page whose cursor holds every shard's position. A shard
// that does not answer within ShardTimeout is left out, with a notice.
func (h *Handler) list(ctx context.Context, p workq.ListParams, ff filterForm, cursor string, d *itemsData) error {
	one := !h.sharded() || ff.Shard != ""
	if one {
		name, err := h.shardNamed(ff.Shard)
		if err != nil {
			return err
		}
		p.Shard = name
	}
	if cursor != "" {
		badCursor := bad("cursor %q is not a position of this list: start from the newest", cursor)
		if one {
			n, err := strconv.ParseInt(cursor, 10, 64)
			if err != nil || n < 1 {
				return badCursor
			}
			cursor = shardlist.Cursor{p.Shard: n}.String()
		} else if _, err := shardlist.ParseCursor(cursor); err != nil {
			return badCursor
		}
		p.Cursor = cursor
	}
	d.First = cursor == ""
	p.Limit = pageSize
	d.Text = p.ErrorText != ""
	if h.sharded() {
		p.AllowPartial = !one
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.o.ShardTimeout)
		defer cancel()
	}
	res, err := h.client.List(ctx, p)
	if err != nil {
		if p.Cursor != "" && workqtype.FieldOf(err) == "cursor" { // it names a shard this list does not read
			return bad("cursor %q is not a position of this list: start from the newest", cursor)
		}
		return err
	}
	d.Items = res.Items
	if d.Items == nil {
		d.Items = []workq.Item{}
	}
	if !h.sharded() {
		for i := range d.Items {
			d.Items[i].Shard = ""
		}
	}
	d.Down = h.notices(ctx, res.Unavailable)
	if res.Next != "" {
		next := res.Next
		if one {
			cur, err := shardlist.ParseCursor(res.Next)
			if err != nil {
				return err
			}
			next = strconv.FormatInt(cur[p.Shard], 10)
		}
		nq := ff.query()
		nq.Set("cursor", next)
		d.Next = template.URL(nq.Encode())
	}
	return nil
}

func messageOf(err error) string {
	_, msg := classify(err)
	return msg
}

type attemptView struct {
	Run          workqtype.Attempt
	Log          string
	LogTruncated int64 // bytes of the log not shown (its beginning)
	LogSize      int64
	HasLog       bool
}

type itemData struct {
	Item           workq.Item
	Payload        string
	PayloadSize    int
	PayloadShown   int
	Details        []detailRow
	Metadata       []detailRow // a job run's metadata, by key
	Attempts       []attemptView
	RunsDir        bool // a runs dir is configured
	CanRetry       bool
	CanCancel      bool
	CanDelete      bool
	Self           string
	RetryLabel     string
	ErrorTruncated bool
	Shard          string // of a sharded dashboard ("": unsharded)
	// WaitsFor is what flow control holds a ready item back with
	// (Client.WaitsFor; flow.go).
	WaitsFor []string
	// Workflow is the workflow of a job run that is a workflow's task (its
	// detail workflow_id; 0: none).
	Workflow int64
}

type detailRow struct{ Name, Value string }

func (h *Handler) item(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return notFound("%q is not an item id.", r.PathValue("id"))
	}
	shard, err := h.shardNamed(r.URL.Query().Get("shard"))
	if err != nil {
		return err
	}
	ref := workq.ItemRef{Table: t, ID: id, Shard: shard}
	it, err := h.client.Get(r.Context(), ref)
	if errors.Is(err, workq.ErrInvalid) { // an id past the largest
		return notFound("%q is not an item id.", r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	att, err := h.client.Attempts(r.Context(), ref)
	if err != nil {
		return err
	}
	self := fmt.Sprintf("items/%s/%d", t, id)
	title := fmt.Sprintf("%s %d", tableTitle(t), id)
	if h.sharded() {
		self += "?shard=" + url.QueryEscape(shard)
		title = fmt.Sprintf("%s %s:%d", tableTitle(t), shard, id)
	} else {
		it.Shard = ""
	}
	d := itemData{Item: it, RunsDir: h.o.RunsDir != "", Self: self, Shard: it.Shard, RetryLabel: "Retry",
		CanRetry: it.Status == "failed" || it.Status == "cancelled", CanCancel: it.Status == "ready" || it.Status == "in_progress" || it.Status == workq.StatePending,
		CanDelete: it.Status == "done" || it.Status == "failed" || it.Status == "cancelled"}
	d.RetryLabel = kindPageOf(t).RetryLabel
	d.Payload, d.PayloadSize, d.PayloadShown = pretty(it.Payload, maxPayloadOut)
	for _, k := range sortedKeys(it.Details) {
		if id, ok := it.Details[k].(int64); ok && k == "workflow_id" {
			d.Workflow = id // a link of its own
			continue
		}
		d.Details = append(d.Details, detailRow{k, detailString(it.Details[k])})
	}
	for _, k := range sortedKeys(it.Metadata) {
		d.Metadata = append(d.Metadata, detailRow{k, it.Metadata[k]})
	}
	for i := len(att) - 1; i >= 0; i-- { // newest first
		av := attemptView{Run: att[i]}
		if h.o.RunsDir != "" && att[i].Outcome != "revived" && att[i].Outcome != "cancelled" {
			av.Log, av.LogSize, av.LogTruncated, av.HasLog = h.readLog(t, id, att[i].RunID.String())
		}
		d.Attempts = append(d.Attempts, av)
	}
	d.WaitsFor = h.waitsFor(r.Context(), it)
	// The attempt running now has no archive row yet: its log may exist.
	h.render(w, r, x, http.StatusOK, "item", title, string(t), d)
	return nil
}

// pretty indents a JSON payload and cuts it to at most max bytes at a
// character boundary; it returns the text, the payload's size and how many
// bytes of the text are shown.
func pretty(raw []byte, max int) (string, int, int) {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s, len(raw), len(s)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func detailString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		s, _, _ := pretty(x, 4096)
		return s
	}
	return fmt.Sprint(v)
}

// readLog reads the end of an attempt's attempt.log under the runs
// directory: <dir>/<table>/<id>/<run id>/attempt.log. The path is built
// from a table of the registry, a number and a UUID, never from input, and
// opened by internal/rundir: never outside dir, through no symbolic link
// beneath it, and only a regular file with one link (anything that can
// write in the runs directory could otherwise make this page show any file
// the API can read). A log refused is shown as no log, and logged.
func (h *Handler) readLog(t workq.Table, id int64, runID string) (text string, size, skipped int64, ok bool) {
	f, err := openLog(h.o.RunsDir, string(t), strconv.FormatInt(id, 10), runID)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("dashboard: attempt log not shown", "table", t, "id", id, "run_id", runID, "err", err)
		}
		return "", 0, 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, 0, false
	}
	size = st.Size()
	if size > maxLogOut {
		skipped = size - maxLogOut
		if _, err := f.Seek(skipped, io.SeekStart); err != nil {
			return "", 0, 0, false
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLogOut))
	if err != nil {
		return "", 0, 0, false
	}
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), size, skipped, true
}

// openLog opens <dir>/<table>/<id>/<run id>/attempt.log for reading.
func openLog(dir string, elems ...string) (*os.File, error) {
	root, err := rundir.Open(dir, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	run, err := rundir.Dir(root, false, elems...)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	return rundir.OpenFile(run, "attempt.log", os.O_RDONLY)
}

type outboxQueue struct {
	Queue   string
	Blocked []workq.OutboxKeyHead
	More    bool
}

type outboxData struct {
	Queues   []outboxQueue
	Joins    []outbox.Join
	OnlyOpen bool
	Next     int64
	Sharded  bool
	Down     []shardNotice // shards whose keys are not shown
}

// outboxQueues are the outbox's queues the sampler saw, plus "default".
func (h *Handler) outboxQueues() []string {
	seen := map[string]bool{"default": true}
	if h.o.Sampler != nil {
		if s, ok := h.o.Sampler.Latest(); ok {
			for k := range s.Queues {
				if k.Table == workq.TableOutbox {
					seen[k.Queue] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// outboxPage shows the blocked keys of every outbox queue (of every
// shard: Client.OutboxKeys through Client.EachShard, a shard that does not
// answer shown as such) and the joins (Client.ListJoins; of the first
// shard on a sharded dashboard).
func (h *Handler) outboxPage(w http.ResponseWriter, r *http.Request, x *session) error {
	q := r.URL.Query()
	d := outboxData{OnlyOpen: q.Get("joins") != "all", Sharded: h.sharded()}
	jq := workq.ListJoinsParams{OnlyOpen: d.OnlyOpen, Limit: joinsShown + 1}
	if c := q.Get("before"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 {
			return bad("before %q is not a join id", c)
		}
		jq.Before = n
	}
	queues := h.outboxQueues()
	var mu sync.Mutex
	keys := map[string][]workq.OutboxKeyHead{}
	timeout := time.Duration(0)
	if h.sharded() {
		timeout = h.o.ShardTimeout
	}
	failed := h.client.EachShard(r.Context(), timeout, func(ctx context.Context, sc *workq.Client) error {
		for _, name := range queues {
			ks, err := sc.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: name, OnlyBlocked: true, Limit: blockedKeys + 1})
			if err != nil {
				return err
			}
			mu.Lock()
			keys[name] = append(keys[name], ks...)
			mu.Unlock()
		}
		return nil
	})
	if !h.sharded() {
		for _, err := range failed {
			return err
		}
	}
	d.Down = h.notices(r.Context(), failed)
	for _, name := range queues {
		ks := keys[name]
		slices.SortStableFunc(ks, func(a, b workq.OutboxKeyHead) int { return strings.Compare(a.PartitionKey, b.PartitionKey) })
		oq := outboxQueue{Queue: name, Blocked: ks}
		if len(ks) > blockedKeys {
			oq.Blocked, oq.More = ks[:blockedKeys], true
		}
		d.Queues = append(d.Queues, oq)
	}
	jc, err := h.shardClient(h.shards[0])
	if err != nil {
		return err
	}
	joins, err := jc.ListJoins(r.Context(), jq)
	if err != nil {
		return err
	}
	if len(joins) > joinsShown {
		joins = joins[:joinsShown]
		d.Next = joins[joinsShown-1].ID
	}
	d.Joins = joins
	h.render(w, r, x, http.StatusOK, "outbox", "Outbox keys and joins", "outbox-keys", d)
	return nil
}

// scheduleRow is a schedule of the schedules page, with its shard.
type scheduleRow struct {
	Shard string
	workq.Schedule
}

// schedulesData is the schedules page: every shard's schedules, by name,
// and the shards that did not answer.
type schedulesData struct {
	Schedules []scheduleRow
	Sharded   bool
	Down      []shardNotice
}

func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request, x *session) error {
	var d schedulesData
	if !h.sharded() {
		list, err := h.client.ListSchedules(r.Context())
		if err != nil {
			return err
		}
		for _, sc := range list {
			d.Schedules = append(d.Schedules, scheduleRow{Schedule: sc})
		}
	} else {
		var mu sync.Mutex
		failed := h.client.EachShard(r.Context(), h.o.ShardTimeout, func(ctx context.Context, sc *workq.Client) error {
			list, err := sc.ListSchedules(ctx)
			mu.Lock()
			defer mu.Unlock()
			for _, s := range list {
				d.Schedules = append(d.Schedules, scheduleRow{Shard: sc.ShardName(), Schedule: s})
			}
			return err
		})
		d.Sharded, d.Down = true, h.notices(r.Context(), failed)
		sort.SliceStable(d.Schedules, func(i, j int) bool {
			if d.Schedules[i].Name != d.Schedules[j].Name {
				return d.Schedules[i].Name < d.Schedules[j].Name
			}
			return d.Schedules[i].Shard < d.Schedules[j].Shard
		})
	}
	h.render(w, r, x, http.StatusOK, "schedules", "Schedules", "schedules", d)
	return nil
}
