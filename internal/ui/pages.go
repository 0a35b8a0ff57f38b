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
	"time"
	"unicode/utf8"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/rundir"
	"github.com/workq/workq/internal/schedule"
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
	case errors.Is(err, admin.ErrNotFound), errors.Is(err, schedule.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, schedule.ErrOverlap):
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

func tableOf(r *http.Request) (lease.Table, error) {
	t, err := lease.ParseTable(r.PathValue("table"))
	if err != nil {
		return "", notFound("There is no work table %q (job_runs, outbox, inbox and timers are).", r.PathValue("table"))
	}
	return t, nil
}

// queueRow is one row of the overview: the sampled backlog, the attempts
// that ended in the history window, and the live pause and limit.
type queueRow struct {
	Table       lease.Table `json:"table"`
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
		paused, limits, err := h.pausesAndLimits(ctx, h.o.DB)
		if err != nil {
			return out, err
		}
		for _, p := range paused {
			r := row(QueueKey{p.Table, p.Queue})
			r.Paused, r.PausedBy = true, p.PausedBy
		}
		for _, l := range limits {
			w := l.MaxInProgress
			row(QueueKey{lease.Table(l.WorkTable), l.Queue}).Limit = &w
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

// pausesAndLimits reads the queues' pauses and limits on db.
func (h *Handler) pausesAndLimits(ctx context.Context, db workqtype.TxDB) ([]lease.PausedQueue, []gen.QueueLimit, error) {
	paused, err := lease.Paused(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	limits, err := gen.New(db).QueueLimitsList(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list limits: %w", err)
	}
	return paused, limits, nil
}

// shardQueueState sets the pauses and limits of a sharded dashboard's
// rows from every shard (each bounded by the shard timeout): a queue is
// paused when it is paused on some shard (PausedShards says where, when
// not on all), and its limit is each shard's budget (ShardLimits). The
// shards that did not answer are named in NoQueueState.
func (h *Handler) shardQueueState(ctx context.Context, row func(QueueKey) *queueRow, out *overviewData) {
	type state struct {
		paused []lease.PausedQueue
		limits []gen.QueueLimit
	}
	per, down := eachShard(ctx, h, func(ctx context.Context, sh Shard) (state, error) {
		p, l, err := h.pausesAndLimits(ctx, sh.DB)
		return state{p, l}, err
	})
	limits := map[QueueKey][]string{}
	pausedAt := map[QueueKey]bool{}
	for i, st := range per {
		name := h.shards[i].Name
		for _, p := range st.paused {
			r := row(QueueKey{p.Table, p.Queue})
			pausedAt[QueueKey{p.Table, p.Queue}] = true
			r.Paused = true
			r.PausedShards = append(r.PausedShards, name)
			if r.PausedBy == "" {
				r.PausedBy = p.PausedBy
			}
		}
		for _, l := range st.limits {
			k := QueueKey{lease.Table(l.WorkTable), l.Queue}
			row(k)
			limits[k] = append(limits[k], fmt.Sprintf("%s %d", name, l.MaxInProgress))
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
	for _, n := range down {
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
		if _, err := lease.ParseTable(tbl); err != nil {
			return bad("table %q: want job_runs, outbox, inbox or timers", tbl)
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

// counts is the page of exact counts: admin.Queues reads every row.
func (h *Handler) counts(w http.ResponseWriter, r *http.Request, x *session) error {
	start := time.Now()
	type row struct {
		Shard string
		Q     admin.Queue
	}
	d := struct {
		Queues  []row
		Took    time.Duration
		Sharded bool
		Down    []shardNotice
	}{Sharded: h.sharded()}
	if !h.sharded() {
		qs, err := admin.Queues(r.Context(), h.o.DB)
		if err != nil {
			return err
		}
		for _, q := range qs {
			d.Queues = append(d.Queues, row{Q: q})
		}
	} else {
		// Every shard at once; one that does not answer its clock within
		// the shard timeout is a notice, not a failed page. The counts
		// themselves read whole tables: only the request bounds them.
		all, down := eachShard(r.Context(), h, func(ctx context.Context, sh Shard) ([]admin.Queue, error) {
			if _, err := admin.Clock(ctx, sh.DB); err != nil {
				return nil, err
			}
			return admin.Queues(r.Context(), sh.DB)
		})
		for i, qs := range all {
			for _, q := range qs {
				d.Queues = append(d.Queues, row{Shard: h.shards[i].Name, Q: q})
			}
		}
		sort.SliceStable(d.Queues, func(i, j int) bool {
			a, b := d.Queues[i], d.Queues[j]
			if a.Q.Table != b.Q.Table || a.Q.Queue != b.Q.Queue {
				return keyLess(QueueKey{a.Q.Table, a.Q.Queue}, QueueKey{b.Q.Table, b.Q.Queue})
			}
			return a.Shard < b.Shard
		})
		d.Down = down
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

// parseFilter reads the filter fields of a query or a form into an
// admin.Filter; times are datetime-local fields in UTC (RFC 3339 too).
func parseFilter(v url.Values) (admin.Filter, filterForm, error) {
	ff := filterForm{Queue: strings.TrimSpace(v.Get("queue")), Status: v.Get("status"), Kind: strings.TrimSpace(v.Get("kind")),
		CreatedAfter: v.Get("created_after"), CreatedBefore: v.Get("created_before"), Error: v.Get("error"), Shard: v.Get("shard")}
	f := admin.Filter{Queue: ff.Queue, Status: ff.Status, Kind: ff.Kind, ErrorText: ff.Error}
	var err error
	if f.CreatedAfter, err = parseFormTime("created after", ff.CreatedAfter); err != nil {
		return f, ff, err
	}
	if f.CreatedBefore, err = parseFormTime("created before", ff.CreatedBefore); err != nil {
		return f, ff, err
	}
	if err := f.Validate(); err != nil {
		return f, ff, err
	}
	return f, ff, nil
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
	Table    lease.Table
	Tables   []lease.Table
	Filter   filterForm
	Statuses []string
	Items    []admin.Item
	Next     template.URL // query string of the next page ("" on the last), encoded by url.Values

	First  bool          // this is the first page
	Self   string        // this page, relative to the root (the actions' way back)
	Error  string        // a bad filter
	Text   bool          // the page searched last_error (bounded)
	Shards []string      // the shards of a sharded dashboard (none: unsharded)
	Down   []shardNotice // shards left out of this page
}

func (h *Handler) items(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	d := itemsData{Table: t, Tables: lease.Tables, Statuses: admin.Statuses, Shards: h.shardList()}
	f, ff, err := parseFilter(q)
	d.Filter = ff
	status := http.StatusOK
	if err != nil {
		d.Error, status = messageOf(err), http.StatusBadRequest
		d.Items = []admin.Item{}
	} else if h.sharded() && ff.Shard == "" {
		if err := h.listMerged(r.Context(), t, f, ff, q.Get("cursor"), &d); err != nil {
			return err
		}
	} else {
		sh, err := h.shardNamed(ff.Shard)
		if err != nil {
			return err
		}
		if c := q.Get("cursor"); c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil || n < 1 || n > lease.MaxItemID {
				return bad("cursor %q is not a position of this list: start from the newest", c)
			}
			f.Before = n
		}
		d.First = f.Before == 0
		f.Limit = pageSize
		d.Text = f.ErrorText != ""
		page, err := admin.List(r.Context(), sh.DB, t, f)
		if err != nil {
			return err
		}
		d.Items = page.Items
		if h.sharded() {
			for i := range d.Items {
				d.Items[i].Shard = sh.Name
			}
		}
		if page.Next != 0 {
			nq := ff.query()
			nq.Set("cursor", strconv.FormatInt(page.Next, 10))
			d.Next = template.URL(nq.Encode())
		}
	}
	d.Self = "items/" + string(t)
	if r.URL.RawQuery != "" {
		d.Self += "?" + r.URL.RawQuery
	}
	h.render(w, r, x, status, "items", tableTitle(t), string(t), d)
	return nil
}

// listMerged fills d with a page of every shard's items
// (internal/shardlist, as the API's), its cursor holding every shard's
// position; a shard that does not answer within ShardTimeout is left out,
// with a notice.
func (h *Handler) listMerged(ctx context.Context, t lease.Table, f admin.Filter, ff filterForm, cursor string, d *itemsData) error {
	cur := shardlist.Cursor{}
	if cursor != "" {
		var err error
		if cur, err = shardlist.ParseCursor(cursor); err != nil {
			return bad("cursor %q is not a position of this list: start from the newest", cursor)
		}
	}
	d.First = cursor == ""
	f.Limit = pageSize
	d.Text = f.ErrorText != ""
	page, err := shardlist.List(ctx, h.listShards(""), t, f, cur, shardlist.Options{Timeout: h.o.ShardTimeout, Tolerate: true})
	if err != nil {
		return err
	}
	d.Items = page.Items
	for _, down := range page.Down {
		d.Down = append(d.Down, h.unreachable(ctx, down.Shard, down.Err))
	}
	if page.Next != nil {
		nq := ff.query()
		nq.Set("cursor", page.Next.String())
		d.Next = template.URL(nq.Encode())
	}
	return nil
}

func messageOf(err error) string {
	_, msg := classify(err)
	return msg
}

func tableTitle(t lease.Table) string {
	switch t {
	case lease.JobRuns:
		return "Job runs"
	case lease.Outbox:
		return "Outbox"
	case lease.Inbox:
		return "Inbox"
	case lease.Timers:
		return "Timers"
	}
	return string(t)
}

type attemptView struct {
	Run          workqtype.Attempt
	Log          string
	LogTruncated int64 // bytes of the log not shown (its beginning)
	LogSize      int64
	HasLog       bool
}

type itemData struct {
	Item           admin.Item
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
}

type detailRow struct{ Name, Value string }

func (h *Handler) item(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 || id > lease.MaxItemID {
		return notFound("%q is not an item id.", r.PathValue("id"))
	}
	sh, err := h.shardNamed(r.URL.Query().Get("shard"))
	if err != nil {
		return err
	}
	it, err := admin.Get(r.Context(), sh.DB, t, id)
	if err != nil {
		return err
	}
	att, err := admin.Attempts(r.Context(), sh.DB, t, id)
	if err != nil {
		return err
	}
	self := fmt.Sprintf("items/%s/%d", t, id)
	title := fmt.Sprintf("%s %d", tableTitle(t), id)
	if h.sharded() {
		it.Shard = sh.Name
		self += "?shard=" + url.QueryEscape(sh.Name)
		title = fmt.Sprintf("%s %s:%d", tableTitle(t), sh.Name, id)
	}
	d := itemData{Item: it, RunsDir: h.o.RunsDir != "", Self: self, Shard: it.Shard, RetryLabel: "Retry",
		CanRetry: it.Status == "failed" || it.Status == "cancelled", CanCancel: it.Status == "ready" || it.Status == "in_progress",
		CanDelete: it.Status == "done" || it.Status == "failed" || it.Status == "cancelled"}
	if t == lease.Inbox {
		d.RetryLabel = "Revive"
	}
	d.Payload, d.PayloadSize, d.PayloadShown = pretty(it.Payload, maxPayloadOut)
	for _, k := range sortedKeys(it.Details) {
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
func (h *Handler) readLog(t lease.Table, id int64, runID string) (text string, size, skipped int64, ok bool) {
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
	Blocked []outboxrt.KeyHead
	More    bool
}

type outboxData struct {
	Queues   []outboxQueue
	Joins    []outbox.Join
	OnlyOpen bool
	Next     int64
}

// outboxQueues are the outbox's queues the sampler saw, plus "default".
func (h *Handler) outboxQueues() []string {
	seen := map[string]bool{"default": true}
	if h.o.Sampler != nil {
		if s, ok := h.o.Sampler.Latest(); ok {
			for k := range s.Queues {
				if k.Table == lease.Outbox {
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

func (h *Handler) outboxPage(w http.ResponseWriter, r *http.Request, x *session) error {
	q := r.URL.Query()
	d := outboxData{OnlyOpen: q.Get("joins") != "all"}
	for _, name := range h.outboxQueues() {
		keys, err := outboxrt.Keys(r.Context(), h.o.DB, outboxrt.KeyQuery{Queue: name, OnlyBlocked: true, Limit: blockedKeys + 1})
		if err != nil {
			return err
		}
		oq := outboxQueue{Queue: name, Blocked: keys}
		if len(keys) > blockedKeys {
			oq.Blocked, oq.More = keys[:blockedKeys], true
		}
		d.Queues = append(d.Queues, oq)
	}
	jq := outboxrt.JoinQuery{OnlyOpen: d.OnlyOpen, Limit: joinsShown + 1}
	if c := q.Get("before"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 {
			return bad("before %q is not a join id", c)
		}
		jq.Before = n
	}
	joins, err := outboxrt.ListJoins(r.Context(), h.o.DB, jq)
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
	schedule.Schedule
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
		list, err := h.o.Schedules.List(r.Context(), h.o.DB)
		if err != nil {
			return err
		}
		for _, sc := range list {
			d.Schedules = append(d.Schedules, scheduleRow{Schedule: sc})
		}
	} else {
		per, down := eachShard(r.Context(), h, func(ctx context.Context, sh Shard) ([]schedule.Schedule, error) {
			return h.o.Schedules.List(ctx, sh.DB)
		})
		d.Sharded, d.Down = true, down
		for i, list := range per {
			for _, sc := range list {
				d.Schedules = append(d.Schedules, scheduleRow{Shard: h.shards[i].Name, Schedule: sc})
			}
		}
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
