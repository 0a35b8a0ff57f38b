package ui

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/lease"
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
	if h.sharded() && f.Get("shard") == "" {
		return bad("Act on the items of one shard: choose it in the filter (items of %v).", h.ShardNames())
	}
	db, err := h.dbOf(f.Get("shard"))
	if err != nil {
		return err
	}
	word := verb
	if verb == "retry" && t == lease.Inbox {
		word = "revive"
	}
	ret := back(r, "items/"+string(t))
	if f.Get("scope") == "matching" {
		filter, ff, err := parseFilter(f)
		if err != nil {
			return err
		}
		if f.Get("confirm") != "yes" {
			desc := "every item"
			if ff.Any() {
				desc = "every item matching " + describe(ff)
			}
			h.confirm(w, r, x, "items/"+string(t)+"/act", fmt.Sprintf("%s %s of %s, newest first, in batches of %d, at most %d items?",
				capitalize(word), desc, t, admin.BulkBatch, admin.DefaultBulk), verb != "retry")
			return nil
		}
		var res admin.BulkResult
		switch verb {
		case "retry":
			res, err = admin.RetryMatching(r.Context(), db, t, by, filter, 0)
		case "cancel":
			res, err = admin.CancelMatching(r.Context(), db, t, by, filter, 0)
		case "delete":
			res, err = admin.DeleteMatching(r.Context(), db, t, filter, 0)
		}
		h.log.InfoContext(r.Context(), "dashboard "+verb+" matching", "table", t, "actor", by.Name, "applied", res.Applied,
			"skipped", res.Skipped, "batches", res.Batches, "next", res.Next, "err", err)
		if err != nil {
			if res.Batches > 0 {
				h.sessions.setFlash(x, fmt.Sprintf("Stopped by an error after %d batches (%d applied): %s", res.Batches, res.Applied, messageOf(err)))
				h.poke()
				redirect(w, r, ret)
				return nil
			}
			return err
		}
		msg := fmt.Sprintf("%s: %d applied, %d skipped (not in the state %s needs), in %d batches.", capitalize(word), res.Applied,
			res.Skipped, word, res.Batches)
		if res.Next != 0 {
			msg += fmt.Sprintf(" Stopped at the cap of %d items: run it again to go on.", admin.DefaultBulk)
		}
		h.sessions.setFlash(x, msg)
		h.poke()
		redirect(w, r, ret)
		return nil
	}

	var ids []int64
	for _, s := range f["id"] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad("id %q is not an item id", s)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return bad("Select at least one item.")
	}
	if err := admin.CheckIDs(ids); err != nil {
		return err
	}
	if verb != "retry" && f.Get("confirm") != "yes" {
		h.confirm(w, r, x, "items/"+string(t)+"/act", fmt.Sprintf("%s %d item(s) of %s (%s)?", capitalize(word), len(ids), t, idList(ids)), true)
		return nil
	}
	var res admin.Result
	switch verb {
	case "retry":
		res, err = admin.Retry(r.Context(), db, t, by, ids...)
	case "cancel":
		res, err = admin.Cancel(r.Context(), db, t, by, ids...)
	case "delete":
		res, err = admin.Delete(r.Context(), db, t, ids...)
	}
	if err != nil {
		return err
	}
	h.log.InfoContext(r.Context(), "dashboard "+verb, "table", t, "actor", by.Name, "applied", len(res.Applied), "skipped", len(res.Skipped))
	msg := fmt.Sprintf("%s: %d applied", capitalize(word), len(res.Applied))
	if len(res.Requested) > 0 {
		msg += fmt.Sprintf(" (%d running: their workers stop them, and they end cancelled: %s)", len(res.Requested), idList(res.Requested))
	}
	if len(res.Skipped) > 0 {
		msg += fmt.Sprintf(", %d skipped (not in the state %s needs, or gone: %s)", len(res.Skipped), word, idList(res.Skipped))
	}
	h.sessions.setFlash(x, msg+".")
	h.poke()
	if verb == "delete" && len(res.Applied) == 1 && strings.HasPrefix(ret, fmt.Sprintf("items/%s/%d", t, ids[0])) {
		ret = "items/" + string(t) // the item is gone
	}
	redirect(w, r, ret)
	return nil
}

// actQueue is pause, resume or limit of one (table, queue).
func (h *Handler) actQueue(w http.ResponseWriter, r *http.Request, x *session) error {
	t, err := tableOf(r)
	if err != nil {
		return err
	}
	queue := r.PathValue("queue")
	var msg string
	switch op := r.PathValue("op"); op {
	case "pause":
		changed, err := lease.Pause(r.Context(), h.o.DB, t, queue, actor(x), r.PostForm.Get("reason"))
		if err != nil {
			return err
		}
		msg = fmt.Sprintf("%s/%s paused: no worker claims from it; items in flight finish.", t, queue)
		if !changed {
			msg = fmt.Sprintf("%s/%s was already paused.", t, queue)
		}
	case "resume":
		changed, err := lease.Resume(r.Context(), h.o.DB, t, queue)
		if err != nil {
			return err
		}
		msg = fmt.Sprintf("%s/%s resumed.", t, queue)
		if !changed {
			msg = fmt.Sprintf("%s/%s was not paused.", t, queue)
		}
	case "limit":
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
		if err := lease.SetLimit(r.Context(), h.o.DB, t, queue, w); err != nil {
			return err
		}
		msg = fmt.Sprintf("%s/%s: limit W set to %d.", t, queue, w)
		if w < 0 {
			msg = fmt.Sprintf("%s/%s: limit removed.", t, queue)
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

func (h *Handler) actTrigger(w http.ResponseWriter, r *http.Request, x *session) error {
	name := r.PathValue("name")
	res, err := h.o.Schedules.TriggerNow(r.Context(), h.o.DB, name, r.PostForm.Get("force") == "yes")
	if err != nil {
		return err
	}
	h.log.InfoContext(r.Context(), "dashboard trigger", "schedule", name, "actor", actor(x), "run", res.RunID)
	h.sessions.setFlash(x, fmt.Sprintf("Schedule %s triggered: job run %d.", name, res.RunID))
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

func idList(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(ids)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
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
