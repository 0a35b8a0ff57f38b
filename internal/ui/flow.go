package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/workq/workq"
)

// flowData is the flow-control page: Client.FlowStatus, of every shard
// that answered.
type flowData struct {
	Status  workq.FlowStatus
	Sharded bool
	Down    []shardNotice // shards whose flow control is not shown
}

// flowPage lists what is under flow control: the queues (fair, auto), each
// rule with its use in its window, the paused kinds (with Resume), and the
// throttled or adapting scopes. A sharded dashboard reads every shard
// (Client.EachShard) and shows those that answer.
func (h *Handler) flowPage(w http.ResponseWriter, r *http.Request, x *session) error {
	d := flowData{Sharded: h.sharded()}
	if !h.sharded() {
		st, err := h.client.FlowStatus(r.Context())
		if err != nil {
			return err
		}
		d.Status = st
	} else {
		var mu sync.Mutex
		failed := h.client.EachShard(r.Context(), h.o.ShardTimeout, func(ctx context.Context, sc *workq.Client) error {
			st, err := sc.FlowStatus(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			d.Status.Queues = append(d.Status.Queues, st.Queues...)
			d.Status.Limits = append(d.Status.Limits, st.Limits...)
			d.Status.PausedKinds = append(d.Status.PausedKinds, st.PausedKinds...)
			d.Status.Throttles = append(d.Status.Throttles, st.Throttles...)
			return nil
		})
		d.Down = h.notices(r.Context(), failed)
		by := func(t workq.Table, q, shard string) string { return string(t) + "\x00" + q + "\x00" + shard }
		slices.SortStableFunc(d.Status.Queues, func(a, b workq.FlowQueueInfo) int {
			return cmp.Compare(by(a.Table, a.Queue, a.Shard), by(b.Table, b.Queue, b.Shard))
		})
		slices.SortStableFunc(d.Status.Limits, func(a, b workq.FlowLimitInfo) int {
			return cmp.Compare(by(a.Table, a.Queue, a.Shard), by(b.Table, b.Queue, b.Shard))
		})
		slices.SortStableFunc(d.Status.PausedKinds, func(a, b workq.KindPauseInfo) int {
			return cmp.Compare(by(a.Table, a.Queue, a.Shard), by(b.Table, b.Queue, b.Shard))
		})
		slices.SortStableFunc(d.Status.Throttles, func(a, b workq.ThrottleInfo) int {
			return cmp.Compare(by(a.Table, a.Queue, a.Shard), by(b.Table, b.Queue, b.Shard))
		})
	}
	h.render(w, r, x, http.StatusOK, "flow", "Flow control", "flow", d)
	return nil
}

// actResumeKind resumes one paused kind (Client.ResumeKind) of the form's
// table, queue, kind and shard.
func (h *Handler) actResumeKind(w http.ResponseWriter, r *http.Request, x *session) error {
	f := r.PostForm
	t, ok := parseTable(f.Get("table"))
	if !ok {
		return bad("There is no work table %q (%s are).", f.Get("table"), tableList())
	}
	if h.sharded() && f.Get("shard") == "" {
		return bad("Name the shard whose kind to resume: this dashboard serves several (%s).", h.shardNames())
	}
	shard, err := h.shardNamed(f.Get("shard"))
	if err != nil {
		return err
	}
	k := workq.KindRef{Table: t, Queue: f.Get("queue"), Kind: f.Get("kind"), Shard: shard}
	changed, err := h.client.ResumeKind(r.Context(), k)
	if err != nil {
		return err
	}
	h.log.InfoContext(r.Context(), "dashboard resume kind", "table", t, "queue", k.Queue, "kind", k.Kind, "shard", shard, "actor", actor(x), "changed", changed)
	where := ""
	if h.sharded() {
		where = " on shard " + shard
	}
	msg := fmt.Sprintf("%s/%s: kind %s resumed%s: workers start it again.", t, k.Queue, k.Kind, where)
	if !changed {
		msg = fmt.Sprintf("%s/%s: kind %s was not paused%s.", t, k.Queue, k.Kind, where)
	}
	h.sessions.setFlash(x, msg)
	h.poke()
	redirect(w, r, back(r, "flow"))
	return nil
}

// flowRate says a rule's rate: "10 per 1s" ("–": none).
func flowRate(l workq.FlowLimitInfo) string {
	if l.Rate == 0 {
		return "–"
	}
	p := l.Period
	if p == 0 {
		p = time.Second
	}
	return strconv.Itoa(l.Rate) + " per " + p.String()
}

// flowScope says a throttle's scope: "queue", "kind K" or "key K".
func flowScope(t workq.ThrottleInfo) string {
	switch {
	case t.Key != "":
		return "key " + t.Key
	case t.Kind != "":
		return "kind " + t.Kind
	}
	return "queue"
}

// ruleScope says a rule's scope: "queue", "kind K" or "each key".
func ruleScope(l workq.FlowLimitInfo) string {
	switch {
	case l.PerKey:
		return "each key"
	case l.Kind != "":
		return "kind " + l.Kind
	}
	return "queue"
}

// waitsFor is what flow control holds a ready item back with
// (Client.WaitsFor); nil for any other item, or when it cannot be read
// (logged: the page shows the item without it).
func (h *Handler) waitsFor(ctx context.Context, it workq.Item) []string {
	if it.Status != "ready" {
		return nil
	}
	shard := it.Shard
	if shard == "" {
		shard = h.shards[0]
	}
	w, err := h.client.WaitsFor(ctx, workq.ItemRef{Table: it.Table, ID: it.ID, Shard: shard})
	if err != nil {
		h.log.WarnContext(ctx, "dashboard: what the item waits for is not shown", "table", it.Table, "id", it.ID, "err", err)
		return nil
	}
	return w
}
