package api

import (
	"net/http"
	"strconv"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/lease"
)

// table reads the {table} path parameter: an unknown table is a 404 (the
// path names no resource).
func table(r *http.Request) (lease.Table, error) {
	name := r.PathValue("table")
	t, err := lease.ParseTable(name)
	if err != nil {
		return "", notFound("no work table %q (want job_runs, outbox, inbox or timers)", name)
	}
	return t, nil
}

// listPage is one page of items. NextCursor is null on the last page;
// otherwise pass it as ?cursor= for the next one. A cursor stays valid
// whatever is inserted meanwhile: newer items never shift a later page.
type listPage struct {
	Items      []admin.Item `json:"items"`
	NextCursor *string      `json:"next_cursor"`
}

func (s *Server) listItems(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	q, err := query(r, "queue", "status", "kind", "created_after", "created_before", "cursor", "limit")
	if err != nil {
		return err
	}
	f := admin.Filter{Queue: q.Get("queue"), Status: q.Get("status"), Kind: q.Get("kind")}
	for _, name := range []string{"queue", "status", "kind"} {
		if q.Has(name) && q.Get(name) == "" {
			return invalid(name, "must not be empty (omit it for every %s)", name)
		}
	}
	if v := q.Get("created_after"); v != "" {
		if f.CreatedAfter, err = parseTime("created_after", v); err != nil {
			return err
		}
	}
	if v := q.Get("created_before"); v != "" {
		if f.CreatedBefore, err = parseTime("created_before", v); err != nil {
			return err
		}
	}
	if q.Has("cursor") {
		c, err := parseInt("cursor", q.Get("cursor"), 1, lease.MaxItemID)
		if err != nil {
			return invalid("cursor", "%q is not a cursor of this API (pass next_cursor of the previous page as it is)", q.Get("cursor"))
		}
		f.Before = c
	}
	if q.Has("limit") {
		n, err := parseInt("limit", q.Get("limit"), 1, admin.MaxLimit)
		if err != nil {
			return err
		}
		f.Limit = int(n)
	}
	if err := f.Validate(); err != nil {
		return invalidErr("", err)
	}
	page, err := admin.List(r.Context(), s.o.DB, t, f)
	if err != nil {
		return err
	}
	out := listPage{Items: page.Items}
	if page.Next != 0 {
		c := strconv.FormatInt(page.Next, 10)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// itemWithAttempts is one item with its archived attempts.
type itemWithAttempts struct {
	Item     admin.Item      `json:"item"`
	Attempts []admin.Attempt `json:"attempts"`
}

func (s *Server) getItem(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	id, err := parseInt("id", r.PathValue("id"), 1, lease.MaxItemID)
	if err != nil {
		return err
	}
	it, err := admin.Get(r.Context(), s.o.DB, t, id)
	if err != nil {
		return err
	}
	att, err := admin.Attempts(r.Context(), s.o.DB, t, id)
	if err != nil {
		return err
	}
	if att == nil {
		att = []admin.Attempt{}
	}
	writeJSON(w, http.StatusOK, itemWithAttempts{Item: it, Attempts: att})
	return nil
}

// actionRequest is the body of retry, cancel and delete.
type actionRequest struct {
	IDs    []int64 `json:"ids"`
	Reason string  `json:"reason"`
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
	if err := admin.CheckIDs(in.IDs); err != nil {
		return invalidErr("ids", err)
	}
	by := admin.Actor{Name: p.actor(), Reason: in.Reason}
	var res admin.Result
	switch verb {
	case "retry":
		res, err = admin.Retry(r.Context(), s.o.DB, t, by, in.IDs...)
	case "cancel":
		res, err = admin.Cancel(r.Context(), s.o.DB, t, by, in.IDs...)
	case "delete":
		res, err = admin.Delete(r.Context(), s.o.DB, t, in.IDs...)
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api "+verb, "table", t, "actor", by.Name, "reason", in.Reason,
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
