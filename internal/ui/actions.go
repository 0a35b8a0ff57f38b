package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// actor is how the run archive and pauses record a dashboard action: the
// API's actor name of the token, so an action reads the same through both
// doors.
func actor(x *session) string { return "api:" + x.who.Name }

// back returns the form's way back (a path relative to the root), or def.
func back(r *http.Request, def string) string {
	if b := r.PostForm.Get("back"); localTarget(b) {
		return b
	}
	return def
}

// confirmData is the confirmation page of an action: what it does, and
// the same form again with confirm set.
type confirmData struct {
	Question string
	Action   string // the form's action, relative to the root
	Fields   [][2]string
	Back     string
	Danger   bool
}

func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, x *session, action, question string, danger bool) {
	var fields [][2]string
	for k, vs := range r.PostForm {
		if k == "csrf" || k == "confirm" {
			continue
		}
		for _, v := range vs {
			fields = append(fields, [2]string{k, v})
		}
	}
	sortFields(fields)
	h.render(w, r, x, http.StatusOK, "confirm", "Confirm", "", confirmData{Question: question, Action: action,
		Fields: fields, Back: back(r, "./"), Danger: danger})
}

func sortFields(f [][2]string) {
	sort.SliceStable(f, func(i, j int) bool { return f[i][0] < f[j][0] })
}

// actItems is retry, cancel or delete of the selected items (id fields),
// or of every item matching the filter (scope=matching, the filter fields;
// done by admin.*Matching in batches of 1000 up to admin.DefaultBulk).
// Cancel, delete and every matching action are confirmed first.
func (h *Handler) actItems(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	f := r.PostForm
	verb := f.Get("action")
	if verb != "retry" && verb != "cancel" && verb != "delete" {
		return bad("action %q: want retry, cancel or delete", verb)
	}
	reason := f.Get("reason")
	by := admin.Actor{Name: actor(x), Reason: reason}
	word := verb
	if verb == "retry" && t == lease.Inbox {
		word = "revive"
	}
	ret := back(r, "items/"+string(t))
	if f.Get("scope") == "matching" {
		return h.actMatching(w, r, x, t, verb, word, by, ret)
	}

	sel, err := h.selected(f)
	if err != nil {
		return err
	}
	if verb != "retry" && f.Get("confirm") != "yes" {
		h.confirm(w, r, x, "items/"+string(t)+"/act", fmt.Sprintf("%s %d item(s) of %s (%s)?", capitalize(word), sel.n, t, sel.list()), true)
		return nil
	}
	var res struct{ Applied, Requested, Skipped []string }
	for _, g := range sel.groups {
		var one admin.Result
		switch verb {
		case "retry":
			one, err = admin.Retry(r.Context(), g.shard.DB, t, by, g.ids...)
		case "cancel":
			one, err = admin.Cancel(r.Context(), g.shard.DB, t, by, g.ids...)
		case "delete":
			one, err = admin.Delete(r.Context(), g.shard.DB, t, g.ids...)
		}
		if err != nil {
			if h.sharded() {
				err = fmt.Errorf("shard %s: %w", g.shard.Name, err)
			}
			if len(res.Applied)+len(res.Skipped) > 0 { // an earlier shard's part is done
				h.sessions.setFlash(x, fmt.Sprintf("%s: %d applied, then shard %s failed: %s", capitalize(word), len(res.Applied), g.shard.Name, messageOf(err)))
				h.poke()
				redirect(w, r, ret)
				return nil
			}
			return err
		}
		res.Applied = append(res.Applied, sel.names(g.shard, one.Applied)...)
		res.Requested = append(res.Requested, sel.names(g.shard, one.Requested)...)
		// Each skipped id with why: "7 is done", "9 not found".
		for i, name := range sel.names(g.shard, one.Skipped) {
			if st, ok := one.States[one.Skipped[i]]; ok {
				res.Skipped = append(res.Skipped, name+" is "+st)
			} else {
				res.Skipped = append(res.Skipped, name+" not found")
			}
		}
		h.log.InfoContext(r.Context(), "dashboard "+verb, "table", t, "shard", g.shard.Name, "actor", by.Name, "applied", len(one.Applied),
			"skipped", len(one.Skipped))
	}
	msg := fmt.Sprintf("%s: %d applied", capitalize(word), len(res.Applied))
	if len(res.Requested) > 0 {
		msg += fmt.Sprintf(" (%d running: their workers stop them, and they end cancelled: %s)", len(res.Requested), strList(res.Requested))
	}
	if len(res.Skipped) > 0 {
		msg += fmt.Sprintf(", %d skipped (%s: not in the state %s needs, or gone)", len(res.Skipped), strList(res.Skipped), word)
	}
	h.sessions.setFlash(x, msg+".")
	h.poke()
	if verb == "delete" && len(res.Applied) == 1 && sel.n == 1 && strings.HasPrefix(ret, fmt.Sprintf("items/%s/%d", t, sel.groups[0].ids[0])) {
		ret = "items/" + string(t) // the item is gone
	}
	redirect(w, r, ret)
	return nil
}

// actMatching is an action on every item matching the form's filter: of
// its shard, or of every shard in turn on a sharded dashboard (the cap
// admin.DefaultBulk is per shard).
func (h *Handler) actMatching(w http.ResponseWriter, r *http.Request, x *session, t lease.Table, verb, word string, by admin.Actor, ret string) error {
	f := r.PostForm
	filter, ff, err := parseFilter(f)
	if err != nil {
		return err
	}
	targets := h.shards
	if ff.Shard != "" || !h.sharded() {
		sh, err := h.shardNamed(ff.Shard)
		if err != nil {
			return err
		}
		targets = []Shard{sh}
	}
	if f.Get("confirm") != "yes" {
		desc := "every item"
		if ff.Any() {
			desc = "every item matching " + describe(ff)
		}
		where := ""
		if len(targets) > 1 {
			where = fmt.Sprintf(" on each of the %d shards in turn", len(targets))
		}
		h.confirm(w, r, x, "items/"+string(t)+"/act", fmt.Sprintf("%s %s of %s%s, newest first, in batches of %d, at most %d items?",
			capitalize(word), desc, t, where, admin.BulkBatch, admin.DefaultBulk), verb != "retry")
		return nil
	}
	var res admin.BulkResult
	capped := false
	for _, sh := range targets {
		var one admin.BulkResult
		switch verb {
		case "retry":
			one, err = admin.RetryMatching(r.Context(), sh.DB, t, by, filter, 0)
		case "cancel":
			one, err = admin.CancelMatching(r.Context(), sh.DB, t, by, filter, 0)
		case "delete":
			one, err = admin.DeleteMatching(r.Context(), sh.DB, t, filter, 0)
		}
		h.log.InfoContext(r.Context(), "dashboard "+verb+" matching", "table", t, "shard", sh.Name, "actor", by.Name, "applied", one.Applied,
			"skipped", one.Skipped, "batches", one.Batches, "next", one.Next, "err", err)
		res.Applied += one.Applied
		res.Skipped += one.Skipped
		res.Batches += one.Batches
		capped = capped || one.Next != 0
		if err != nil {
			if h.sharded() {
				err = fmt.Errorf("shard %s: %w", sh.Name, err)
			}
			if res.Batches > 0 {
				h.sessions.setFlash(x, fmt.Sprintf("Stopped by an error after %d batches (%d applied): %s", res.Batches, res.Applied, messageOf(err)))
				h.poke()
				redirect(w, r, ret)
				return nil
			}
			return err
		}
	}
	msg := fmt.Sprintf("%s: %d applied, %d skipped (not in the state %s needs), in %d batches.", capitalize(word), res.Applied,
		res.Skipped, word, res.Batches)
	if capped {
		msg += fmt.Sprintf(" Stopped at the cap of %d items: run it again to go on.", admin.DefaultBulk)
	}
	h.sessions.setFlash(x, msg)
	h.poke()
	redirect(w, r, ret)
	return nil
}

// selection is the items a form selected, by shard.
type selection struct {
	groups  []shardIDs
	n       int
	sharded bool
}

type shardIDs struct {
	shard Shard
	ids   []int64
}

// selected reads the form's id fields: ID (of the form's shard field, or
// the one database) or SHARD:ID. Every shard is checked before anything is
// done: a missing shard on a sharded dashboard is a 400, an unknown one a
// 404.
func (h *Handler) selected(f url.Values) (selection, error) {
	sel := selection{sharded: h.sharded()}
	at := map[string]int{}
	for _, s := range f["id"] {
		name, num := f.Get("shard"), s
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			name, num = s[:i], s[i+1:]
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return sel, bad("id %q is not an item id", s)
		}
		sh, err := h.shardNamed(name)
		if err != nil {
			return sel, err
		}
		i, ok := at[sh.Name]
		if !ok {
			i = len(sel.groups)
			at[sh.Name] = i
			sel.groups = append(sel.groups, shardIDs{shard: sh})
		}
		sel.groups[i].ids = append(sel.groups[i].ids, id)
		sel.n++
	}
	if sel.n == 0 {
		return sel, bad("Select at least one item.")
	}
	for _, g := range sel.groups {
		if err := admin.CheckIDs(g.ids); err != nil {
			return sel, err
		}
	}
	return sel, nil
}

// names are ids as the messages say them: SHARD:ID when sharded.
func (sel selection) names(sh Shard, ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
		if sel.sharded {
			out[i] = sh.Name + ":" + out[i]
		}
	}
	return out
}

// list is the selection in words.
func (sel selection) list() string {
	var all []string
	for _, g := range sel.groups {
		all = append(all, sel.names(g.shard, g.ids)...)
	}
	return strList(all)
}

// actQueue is pause, resume or limit of one (table, queue). On a sharded
// dashboard pause and resume apply to every shard (a sharded logical queue
// is one queue) and the message says each shard's outcome; the limit
// names one shard's budget (the form's shard field): a W over all of them
// is kept by workq shard-limit.
func (h *Handler) actQueue(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	queue := r.PathValue("queue")
	var msg string
	switch op := r.PathValue("op"); op {
	case "pause", "resume":
		if msg, err = h.setPaused(r, x, t, queue, op == "pause"); err != nil {
			return err
		}
	case "limit":
		sh, err := h.limitShard(r.PostForm.Get("shard"))
		if err != nil {
			return err
		}
		v := strings.TrimSpace(r.PostForm.Get("limit"))
		if r.PostForm.Get("remove") != "" {
			v = ""
		}
		w := -1
		if v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > lease.MaxLimit {
				return bad("Limit %q: want W, a whole number from 0 to %d (Remove takes the limit away).", v, lease.MaxLimit)
			}
			w = n
		}
		if err := lease.SetLimit(r.Context(), sh.DB, t, queue, w); err != nil {
			return err
		}
		where := ""
		if h.sharded() {
			where = " on shard " + sh.Name
		}
		msg = fmt.Sprintf("%s/%s: limit W set to %d%s.", t, queue, w, where)
		if w < 0 {
			msg = fmt.Sprintf("%s/%s: limit removed%s.", t, queue, where)
		}
	default:
		return notFound("There is no queue action %q.", op)
	}
	h.log.InfoContext(r.Context(), "dashboard queue action", "table", t, "queue", queue, "op", r.PathValue("op"), "actor", actor(x))
	h.sessions.setFlash(x, msg)
	h.poke()
	redirect(w, r, back(r, "./"))
	return nil
}

// setPaused pauses or resumes the queue on every shard at once and says
// how it went; a shard that failed is named (the others stay changed:
// doing it again is harmless).
func (h *Handler) setPaused(r *http.Request, x *session, t lease.Table, queue string, pause bool) (string, error) {
	reason := r.PostForm.Get("reason")
	f := func(ctx context.Context, sh Shard) (bool, error) {
		if pause {
			return lease.Pause(ctx, sh.DB, t, queue, actor(x), reason)
		}
		return lease.Resume(ctx, sh.DB, t, queue)
	}
	word, already, verb := "resumed", "was not paused", "Resume"
	if pause {
		word, already, verb = "paused: no worker claims from it; items in flight finish", "was already paused", "Pause"
	}
	if !h.sharded() {
		changed, err := f(r.Context(), h.shards[0])
		if err != nil {
			return "", err
		}
		if !changed {
			return fmt.Sprintf("%s/%s %s.", t, queue, already), nil
		}
		return fmt.Sprintf("%s/%s %s.", t, queue, word), nil
	}
	changed := make([]bool, len(h.shards))
	errs := make([]error, len(h.shards))
	var wg sync.WaitGroup
	for i, sh := range h.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), h.o.ShardTimeout)
			defer cancel()
			changed[i], errs[i] = f(ctx, sh)
		}()
	}
	wg.Wait()
	var done, same, failed []string
	for i, sh := range h.shards {
		switch err := errs[i]; {
		case err != nil && errors.Is(err, workqtype.ErrInvalid):
			return "", err // refused alike by every shard: nothing changed
		case err != nil:
			n := h.unreachable(r.Context(), sh.Name, err)
			failed = append(failed, fmt.Sprintf("%s (%s)", sh.Name, n.Error))
		case changed[i]:
			done = append(done, sh.Name)
		default:
			same = append(same, sh.Name)
		}
	}
	switch {
	case len(failed) == len(h.shards):
		return fmt.Sprintf("%s of %s/%s failed on every shard: %s. Nothing changed.", verb, t, queue, strings.Join(failed, "; ")), nil
	case len(failed) > 0:
		return fmt.Sprintf("%s of %s/%s failed on shard %s; done on %s: do it again when the shard is back.", verb, t, queue,
			strings.Join(failed, "; "), strings.Join(append(done, same...), ", ")), nil
	case len(done) == 0:
		return fmt.Sprintf("%s/%s %s on every shard.", t, queue, already), nil
	}
	msg := fmt.Sprintf("%s/%s %s, on every shard", t, queue, word)
	if len(same) > 0 {
		msg += fmt.Sprintf(" (shard %s %s)", strings.Join(same, ", "), already)
	}
	return msg + ".", nil
}

// limitShard is the shard whose budget a limit action sets: the one
// database, or the shard the form names on a sharded dashboard (a W over
// every shard is workq shard-limit's, whose leader would overwrite a
// budget set here).
func (h *Handler) limitShard(name string) (Shard, error) {
	if h.sharded() && name == "" {
		return Shard{}, bad("This dashboard serves several shards (%s): a limit W over all of them is kept by workq shard-limit "+
			"(or ShardingConfig.GlobalLimits), which sets each shard's budget. Set one shard's budget with workq limit on that shard, "+
			"or PUT /v1/queues/TABLE/QUEUE/limit?shard=NAME.", h.shardNames())
	}
	return h.shardNamed(name)
}

func (h *Handler) actTrigger(w http.ResponseWriter, r *http.Request, x *session) error {
	name := r.PathValue("name")
	sh, err := h.scheduleShard(name, r.PostForm.Get("shard"))
	if err != nil {
		return err
	}
	res, err := h.o.Schedules.TriggerNow(r.Context(), sh.DB, name, r.PostForm.Get("force") == "yes")
	if err != nil {
		return err
	}
	h.log.InfoContext(r.Context(), "dashboard trigger", "schedule", name, "shard", sh.Name, "actor", actor(x), "run", res.RunID)
	run := strconv.FormatInt(res.RunID, 10)
	if h.sharded() {
		run = sh.Name + ":" + run
	}
	h.sessions.setFlash(x, fmt.Sprintf("Schedule %s triggered: job run %s.", name, run))
	redirect(w, r, back(r, "schedules"))
	return nil
}

func (h *Handler) poke() {
	if h.o.Sampler != nil {
		h.o.Sampler.Poke()
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func strList(ids []string) string {
	var b strings.Builder
	for i, id := range ids {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(ids)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(id)
	}
	return b.String()
}

// describe says a filter in words.
func describe(ff filterForm) string {
	var parts []string
	q := ff.query()
	for _, name := range filterNames {
		if v := q.Get(name); v != "" {
			parts = append(parts, strings.ReplaceAll(name, "_", " ")+" "+strconv.Quote(v))
		}
	}
	return strings.Join(parts, ", ")
}
