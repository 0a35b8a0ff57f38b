package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/workq/workq"
	"github.com/workq/workq/workqtype"
)

// maxItemID is the largest item id (the Client refuses a larger one in an
// ItemRef); a test keeps it equal to the engine's.
const maxItemID = 1<<60 - 1

// table reads the {table} path parameter: an unknown table is a 404 (the
// path names no resource).
func table(r *http.Request) (workq.Table, error) {
	name := r.PathValue("table")
	t := workq.Table(name)
	if !slices.Contains(workq.Tables(), t) {
		return "", notFound("no work table %q (want job_runs, outbox, inbox or timers)", name)
	}
	return t, nil
}

// listPage is one page of items. NextCursor is null on the last page;
// otherwise pass it as ?cursor= for the next one. A cursor stays valid
// whatever is inserted meanwhile: newer items never shift a later page.
type listPage struct {
	Items      []workq.Item `json:"items"`
	NextCursor *string      `json:"next_cursor"`
}

func (s *Server) listItems(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	q, err := query(r, append(filterFields, "limit", "shard")...)
	if err != nil {
		return err
	}
	given := map[string]*string{}
	for _, name := range filterFields {
		if q.Has(name) {
			v := q.Get(name)
			given[name] = &v
		}
	}
	shard := q.Get("shard")
	if q.Has("shard") && shard == "" {
		return invalid("shard", "must not be empty (omit it to list every shard)")
	}
	var cursorText string
	if s.sharded() {
		// A merged list's cursor holds every shard's position.
		cursorText = q.Get("cursor")
		delete(given, "cursor")
	} else if shard != "" {
		if _, err := s.shardNamed("shard", shard); err != nil {
			return err
		}
	}
	f, err := filterOf("", given)
	if err != nil {
		return err
	}
	if q.Has("limit") {
		n, err := parseInt("limit", q.Get("limit"), 1, workq.MaxListLimit)
		if err != nil {
			return err
		}
		f.Limit = int(n)
	}
	if s.sharded() {
		return s.listItemsSharded(w, r, t, f, shard, cursorText)
	}
	page, err := s.opList(r.Context(), s.shards[0], t, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listPage{Items: page.Items, NextCursor: cursor(page.Next)})
	return nil
}

// filterFields are the filter's names, as query parameters of a list and
// as the members of an action's "filter" object.
var filterFields = []string{"queue", "status", "kind", "created_after", "created_before", "error", "cursor"}

// filterOf builds a filter from the given filter fields (nil: not given);
// prefix goes before the field names in errors ("filter."). The Client
// checks the rest (a queue's name, a status, a kind...) before it reads or
// writes anything.
func filterOf(prefix string, given map[string]*string) (filter, error) {
	var f filter
	for _, name := range filterFields {
		v := given[name]
		if v == nil {
			continue
		}
		field := prefix + name
		if *v == "" {
			return filter{}, invalid(field, "must not be empty (omit it to match every item)")
		}
		var err error
		switch name {
		case "queue":
			f.Queue = *v
		case "status":
			f.States = []string{*v}
		case "kind":
			f.Kind = *v
		case "error":
			f.ErrorText = *v
		case "created_after":
			f.CreatedAfter, err = parseTime(field, *v)
		case "created_before":
			f.CreatedBefore, err = parseTime(field, *v)
		case "cursor":
			if f.before, err = parseInt(field, *v, 1, maxItemID); err != nil {
				err = invalid(field, "%q is not a cursor of this API (pass next_cursor of the previous page as it is)", *v)
			}
		}
		if err != nil {
			return filter{}, err
		}
	}
	return f, nil
}

// cursor is the next_cursor of a keyset position (null for 0: the end).
func cursor(next int64) *string {
	if next == 0 {
		return nil
	}
	c := strconv.FormatInt(next, 10)
	return &c
}

// itemWithAttempts is one item with its archived attempts, and what flow
// control holds it back with (a ready item's; waits.go).
type itemWithAttempts struct {
	Item     workq.Item          `json:"item"`
	Attempts []workqtype.Attempt `json:"attempts"`
	WaitsFor []string            `json:"waits_for,omitempty"`
	// TimedOut: a wait ran out before the job run ended (it is shown as
	// it is).
	TimedOut bool `json:"timed_out,omitempty"`
}

func (s *Server) getItem(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	q, err := query(r, "shard", "wait")
	if err != nil {
		return err
	}
	wait, err := waitParam(q)
	if err != nil {
		return err
	}
	if q.Has("wait") && t != workq.TableJobRuns {
		return invalid("wait", "only a job run can be waited for")
	}
	sh, err := s.shardNamed("shard", q.Get("shard"))
	if err != nil {
		return err
	}
	id, err := parseInt("id", r.PathValue("id"), 1, maxItemID)
	if err != nil {
		return err
	}
	timedOut := false
	if wait > 0 {
		// Until the job run has ended (Client.Wait), or the wait runs out.
		ref := workq.ItemRef{Table: t, ID: id, Shard: sh.Name}
		if timedOut, err = s.waitFor(r.Context(), wait, func(ctx context.Context) error {
			_, err := s.client.Wait(ctx, ref)
			return err
		}); err != nil {
			return err
		}
	}
	it, err := s.opGet(r.Context(), sh, t, id)
	if err != nil {
		return err
	}
	it.Shard = sh.Name
	att, err := s.opAttempts(r.Context(), sh, t, id)
	if err != nil {
		return err
	}
	if att == nil {
		att = []workqtype.Attempt{}
	}
	out := itemWithAttempts{Item: it, Attempts: att, TimedOut: timedOut}
	if it.Status == "ready" {
		out.WaitsFor = s.opWaitsFor(r.Context(), sh, t, id)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// actionRequest is the body of retry, cancel and delete.
type actionRequest struct {
	IDs    []int64 `json:"ids"`
	Reason string  `json:"reason"`
	Shard  string  `json:"shard"` // the items' shard: required when the API serves several
}

func (s *Server) act(w http.ResponseWriter, r *http.Request, p principal, verb string) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	var in actionRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if err := checkIDs(in.IDs); err != nil {
		return err
	}
	sh, err := s.shardNamed("shard", in.Shard)
	if err != nil {
		return err
	}
	by := &workq.ActionOpts{Actor: p.actor(), Reason: in.Reason}
	res, err := s.opAct(r.Context(), sh, t, verb, by, in.IDs)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api "+verb, "table", t, "actor", by.Actor, "reason", in.Reason,
		"applied", len(res.Applied), "skipped", len(res.Skipped))
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) retryItems(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.act(w, r, p, "retry")
}

func (s *Server) cancelItems(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.act(w, r, p, "cancel")
}

func (s *Server) deleteItems(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.act(w, r, p, "delete")
}

// matchingRequest is the body of the .../{action}-matching endpoints: the
// filter of a list (its query parameters as members; required, {} matches
// every item), the reason of a retry or cancel, and the most items to visit.
type matchingRequest struct {
	Filter *struct {
		Queue         *string `json:"queue"`
		Status        *string `json:"status"`
		Kind          *string `json:"kind"`
		CreatedAfter  *string `json:"created_after"`
		CreatedBefore *string `json:"created_before"`
		Error         *string `json:"error"`
		Cursor        *string `json:"cursor"`
	} `json:"filter"`
	Reason string `json:"reason"`
	Max    *int   `json:"max"`
	Shard  string `json:"shard"` // the items' shard: required when the API serves several
}

// matchingResult is the answer of an action on a filter.
type matchingResult struct {
	Applied    int     `json:"applied"`
	Skipped    int     `json:"skipped"`
	Batches    int     `json:"batches"`
	NextCursor *string `json:"next_cursor"` // where a capped action stopped: pass it as filter.cursor to go on
}

func (s *Server) actMatching(w http.ResponseWriter, r *http.Request, p principal, verb string) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	var in matchingRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Filter == nil {
		return invalid("filter", "required: the items to act on, as the list's query parameters (an empty object matches every item)")
	}
	fl := in.Filter
	f, err := filterOf("filter.", map[string]*string{"queue": fl.Queue, "status": fl.Status, "kind": fl.Kind,
		"created_after": fl.CreatedAfter, "created_before": fl.CreatedBefore, "error": fl.Error, "cursor": fl.Cursor})
	if err != nil {
		return err
	}
	max := 0
	if in.Max != nil {
		if *in.Max < 1 || *in.Max > workq.MaxMatchingMax {
			return invalid("max", "want 1 to %d (omit it for %d)", workq.MaxMatchingMax, workq.DefaultMatchingMax)
		}
		max = *in.Max
	}
	sh, err := s.shardNamed("shard", in.Shard)
	if err != nil {
		return err
	}
	by := &workq.ActionOpts{Actor: p.actor(), Reason: in.Reason}
	res, err := s.opActMatching(r.Context(), sh, t, verb, by, f, max)
	s.log.InfoContext(r.Context(), "api "+verb+" matching", "table", t, "actor", by.Actor, "reason", in.Reason,
		"applied", res.Applied, "skipped", res.Skipped, "batches", res.Batches, "next", res.Next, "err", err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, matchingResult{Applied: res.Applied, Skipped: res.Skipped, Batches: res.Batches, NextCursor: cursor(res.Next)})
	return nil
}

func (s *Server) retryMatching(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.actMatching(w, r, p, "retry")
}

func (s *Server) cancelMatching(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.actMatching(w, r, p, "cancel")
}

func (s *Server) deleteMatching(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.actMatching(w, r, p, "delete")
}

// checkIDs checks the ids of one action: 1 to workq.MaxActionItems of
// them, each a valid item id, none twice (the Client checks them too; the
// API's errors name the ids member).
func checkIDs(ids []int64) error {
	bad := func(format string, args ...any) error {
		return invalidErr("", workqtype.Invalid("ids", fmt.Sprintf(format, args...)))
	}
	if len(ids) == 0 {
		return bad("no ids given")
	}
	if len(ids) > workq.MaxActionItems {
		return bad("%d ids, want at most %d per request", len(ids), workq.MaxActionItems)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id <= 0 || id > maxItemID {
			return bad("id %d: want 1 to %d", id, int64(maxItemID))
		}
		if seen[id] {
			return bad("id %d given twice", id)
		}
		seen[id] = true
	}
	return nil
}
