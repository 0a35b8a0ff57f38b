package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/workq/workq"
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

// matchingBatch is the items one statement of a matching action takes
// (the Client's batches; the confirmation says it).
const matchingBatch = workq.MaxActionItems

// actItems is retry, cancel or delete of the selected items (id fields:
// Client.RetryMany, CancelMany, DeleteMany), or of every item matching the
// filter (scope=matching, the filter fields: Client.*Matching, in batches
// up to workq.DefaultMatchingMax). Cancel, delete and every matching
// action are confirmed first.
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
	by := &workq.ActionOpts{Actor: actor(x), Reason: f.Get("reason")}
	word := verb
	if verb == "retry" {
		word = kindPageOf(t).RetryWord
	}
	ret := back(r, "items/"+string(t))
	if f.Get("scope") == "matching" {
		return h.actMatching(w, r, x, t, verb, word, by, ret)
	}

	refs, err := h.selected(t, f)
	if err != nil {
		return err
	}
	if verb != "retry" && f.Get("confirm") != "yes" {
		h.confirm(w, r, x, "items/"+string(t)+"/act", fmt.Sprintf("%s %d item(s) of %s (%s)?", capitalize(word), len(refs), t, h.refList(refs)), true)
		return nil
	}
	var res workq.ActionResult
	switch verb {
	case "retry":
		res, err = h.client.RetryMany(r.Context(), refs, by)
	case "cancel":
		res, err = h.client.CancelMany(r.Context(), refs, by)
	case "delete":
		res, err = h.client.DeleteMany(r.Context(), refs)
	}
	h.log.InfoContext(r.Context(), "dashboard "+verb, "table", t, "actor", by.Actor, "applied", len(res.Applied),
		"skipped", len(res.NotFound)+len(res.WrongState), "err", err)
	if err != nil {
		if len(res.Applied)+len(res.NotFound)+len(res.WrongState) > 0 { // an earlier shard's part is done
			h.sessions.setFlash(x, fmt.Sprintf("%s: %d applied, then it failed: %s", capitalize(word), len(res.Applied), messageOf(err)))
			h.poke()
			redirect(w, r, ret)
			return nil
		}
		return err
	}
	var applied, requested, skipped []string
	for _, ref := range res.Applied {
		applied = append(applied, h.refName(ref))
	}
	for _, ref := range res.Requested {
		requested = append(requested, h.refName(ref))
	}
	// Each skipped item with why, in the selection's order: "7 is done", "9 not found".
	for _, ref := range refs {
		if st, ok := res.WrongState[ref]; ok {
			skipped = append(skipped, h.refName(ref)+" is "+st)
		} else if slices.Contains(res.NotFound, ref) {
			skipped = append(skipped, h.refName(ref)+" not found")
		}
	}
	msg := fmt.Sprintf("%s: %d applied", capitalize(word), len(applied))
	if len(requested) > 0 {
		msg += fmt.Sprintf(" (%d running: their workers stop them, and they end cancelled: %s)", len(requested), strList(requested))
	}
	if len(skipped) > 0 {
		msg += fmt.Sprintf(", %d skipped (%s: not in the state %s needs, or gone)", len(skipped), strList(skipped), word)
	}
	h.sessions.setFlash(x, msg+".")
	h.poke()
	if verb == "delete" && len(applied) == 1 && len(refs) == 1 && strings.HasPrefix(ret, fmt.Sprintf("items/%s/%d", t, refs[0].ID)) {
		ret = "items/" + string(t) // the item is gone
	}
	redirect(w, r, ret)
	return nil
}

// actMatching is an action on every item matching the form's filter: of
// its shard, or of every shard in turn on a sharded dashboard (the cap
// workq.DefaultMatchingMax is per shard).
func (h *Handler) actMatching(w http.ResponseWriter, r *http.Request, x *session, t workq.Table, verb, word string, by *workq.ActionOpts, ret string) error {
	f := r.PostForm
	p, ff, err := parseFilter(t, f)
	if err != nil {
		return err
	}
	if err := h.checkFilter(r.Context(), p); err != nil {
		return err
	}
	targets := h.shards
	if ff.Shard != "" || !h.sharded() {
		name, err := h.shardNamed(ff.Shard)
		if err != nil {
			return err
		}
		targets = []string{name}
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
			capitalize(word), desc, t, where, matchingBatch, workq.DefaultMatchingMax), verb != "retry")
		return nil
	}
	var res workq.MatchingResult
	capped := false
	for _, name := range targets {
		p.Shard = name
		var one workq.MatchingResult
		switch verb {
		case "retry":
			one, err = h.client.RetryMatching(r.Context(), p, 0, by)
		case "cancel":
			one, err = h.client.CancelMatching(r.Context(), p, 0, by)
		case "delete":
			one, err = h.client.DeleteMatching(r.Context(), p, 0)
		}
		h.log.InfoContext(r.Context(), "dashboard "+verb+" matching", "table", t, "shard", name, "actor", by.Actor, "applied", one.Applied,
			"skipped", one.Skipped, "batches", one.Batches, "next", one.Next, "err", err)
		res.Applied += one.Applied
		res.Skipped += one.Skipped
		res.Batches += one.Batches
		capped = capped || one.Next != ""
		if err != nil {
			if h.sharded() {
				err = fmt.Errorf("shard %s: %w", name, err)
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
		msg += fmt.Sprintf(" Stopped at the cap of %d items: run it again to go on.", workq.DefaultMatchingMax)
	}
	h.sessions.setFlash(x, msg)
	h.poke()
	redirect(w, r, ret)
	return nil
}

// selected reads the form's id fields as refs of table t: ID (of the
// form's shard field, or the one database) or SHARD:ID. Every shard is
// checked before anything is done: a missing shard on a sharded dashboard
// is a 400, an unknown one a 404 (the Client checks the rest).
func (h *Handler) selected(t workq.Table, f url.Values) ([]workq.ItemRef, error) {
	var refs []workq.ItemRef
	for _, s := range f["id"] {
		name, num := f.Get("shard"), s
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			name, num = s[:i], s[i+1:]
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, bad("id %q is not an item id", s)
		}
		shard, err := h.shardNamed(name)
		if err != nil {
			return nil, err
		}
		refs = append(refs, workq.ItemRef{Table: t, ID: id, Shard: shard})
	}
	if len(refs) == 0 {
		return nil, bad("Select at least one item.")
	}
	return refs, nil
}

// refList is the selection in words.
func (h *Handler) refList(refs []workq.ItemRef) string {
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = h.refName(ref)
	}
	return strList(names)
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
		shard, err := h.limitShard(r.PostForm.Get("shard"))
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
			if err != nil || n < 0 || n > math.MaxInt32 {
				return bad("Limit %q: want W, a whole number from 0 to %d (Remove takes the limit away).", v, math.MaxInt32)
			}
			w = n
		}
		q := workq.QueueRef{Table: t, Queue: queue, Shard: shard}
		if w < 0 {
			err = h.client.RemoveQueueLimit(r.Context(), q)
		} else {
			err = h.client.SetQueueLimit(r.Context(), q, w)
		}
		if err != nil {
			return err
		}
		where := ""
		if h.sharded() {
			where = " on shard " + shard
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

// setPaused pauses or resumes the queue on every shard at once
// (Client.EachShard) and says how it went; a shard that failed is named
// (the others stay changed: doing it again is harmless).
func (h *Handler) setPaused(r *http.Request, x *session, t workq.Table, queue string, pause bool) (string, error) {
	opts := &workq.ActionOpts{Actor: actor(x), Reason: r.PostForm.Get("reason")}
	q := workq.QueueRef{Table: t, Queue: queue}
	f := func(ctx context.Context, c *workq.Client) (bool, error) {
		if pause {
			return c.PauseQueue(ctx, q, opts)
		}
		return c.ResumeQueue(ctx, q)
	}
	word, already, verb := "resumed", "was not paused", "Resume"
	if pause {
		word, already, verb = "paused: no worker claims from it; items in flight finish", "was already paused", "Pause"
	}
	if !h.sharded() {
		changed, err := f(r.Context(), h.client)
		if err != nil {
			return "", err
		}
		if !changed {
			return fmt.Sprintf("%s/%s %s.", t, queue, already), nil
		}
		return fmt.Sprintf("%s/%s %s.", t, queue, word), nil
	}
	var mu sync.Mutex
	changed := map[string]bool{}
	errs := h.client.EachShard(r.Context(), h.o.ShardTimeout, func(ctx context.Context, sc *workq.Client) error {
		ch, err := f(ctx, sc)
		mu.Lock()
		changed[sc.ShardName()] = ch
		mu.Unlock()
		return err
	})
	var done, same, failed []string
	for _, name := range h.shards {
		switch err := errs[name]; {
		case err != nil && errors.Is(err, workq.ErrInvalid):
			return "", err // refused alike by every shard: nothing changed
		case err != nil:
			n := h.unreachable(r.Context(), name, err)
			failed = append(failed, fmt.Sprintf("%s (%s)", name, n.Error))
		case changed[name]:
			done = append(done, name)
		default:
			same = append(same, name)
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
func (h *Handler) limitShard(name string) (string, error) {
	if h.sharded() && name == "" {
		return "", bad("This dashboard serves several shards (%s): a limit W over all of them is kept by workq shard-limit "+
			"(or ShardingConfig.GlobalLimits), which sets each shard's budget. Set one shard's budget with workq limit on that shard, "+
			"or PUT /v1/queues/TABLE/QUEUE/limit?shard=NAME.", h.shardNames())
	}
	return h.shardNamed(name)
}

func (h *Handler) actTrigger(w http.ResponseWriter, r *http.Request, x *session) error {
	name := r.PathValue("name")
	shard, err := h.scheduleShard(name, r.PostForm.Get("shard"))
	if err != nil {
		return err
	}
	sc, err := h.shardClient(shard)
	if err != nil {
		return err
	}
	res, err := sc.TriggerSchedule(r.Context(), name, r.PostForm.Get("force") == "yes")
	if err != nil {
		return err
	}
	h.log.InfoContext(r.Context(), "dashboard trigger", "schedule", name, "shard", shard, "actor", actor(x), "run", res.RunID)
	run := strconv.FormatInt(res.RunID, 10)
	if h.sharded() {
		run = shard + ":" + run
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
