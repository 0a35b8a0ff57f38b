package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// DefaultShard names the one database of a Client of workq.NewClient
// (workq.DefaultShard): its items carry no shard, and a shard parameter
// may name it so.
const DefaultShard = workq.DefaultShard

// dbShard is one database of the Client: its shard's name ("" for the one
// of a NewClient) and a DB on it in the Client's schema (the dashboard's:
// the handlers reach a shard through the Client, client.Shard(Name)).
type dbShard struct {
	Name string
	DB   workqtype.TxDB
}

// shardsOf returns the Client's databases as the API names them: a
// Client of NewClient has one, unnamed (its items and results carry no
// shard); a Client of NewShardedClient has its shards, by name.
func shardsOf(h clienthook.API) []dbShard {
	out := make([]dbShard, len(h.Shards))
	for i, sh := range h.Shards {
		out[i] = dbShard{Name: sh.Name, DB: sh.DB}
	}
	if !h.Sharded && out[0].Name == DefaultShard {
		out[0].Name = ""
	}
	return out
}

// shardLabel is the shard an enqueue result names: the Client's result's
// shard on a sharded server, else the one shard's name ("" for a
// NewClient's).
func (s *Server) shardLabel(name string) string {
	if s.sharded() {
		return name
	}
	return s.shards[0].Name
}

// sharded reports whether the server serves several shards.
func (s *Server) sharded() bool { return len(s.shards) > 1 }

// shardNamed returns the shard called name: "" is the only one of an
// unsharded server, and required on a sharded one (field names where it
// was given: the shard query parameter or body member).
func (s *Server) shardNamed(field, name string) (dbShard, error) {
	if name == "" {
		if s.sharded() {
			return dbShard{}, invalid(field, "required: this API serves several shards (%s); name the item's", s.shardNames())
		}
		return s.shards[0], nil
	}
	for _, sh := range s.shards {
		if sh.Name == name {
			return sh, nil
		}
	}
	if !s.sharded() && (name == s.shards[0].Name || name == DefaultShard) {
		return s.shards[0], nil
	}
	return dbShard{}, notFound("no shard %q (the shards are %s)", name, s.shardNames())
}

func (s *Server) shardNames() string {
	var names []string
	for _, sh := range s.shards {
		names = append(names, sh.Name)
	}
	if len(names) == 1 && names[0] == "" {
		return "one, unnamed"
	}
	return fmt.Sprint(names)
}

// listItemsSharded serves GET /v1/tables/{table}/items on a sharded
// server: ?shard=NAME lists one shard (its own cursor, an id), else every
// shard merged newest first (the sharded Client's List: created_at, then
// shard and id), each item tagged with its shard, from a cursor that
// holds every shard's position, so a page never repeats or skips an item
// of a shard.
func (s *Server) listItemsSharded(w http.ResponseWriter, r *http.Request, t workq.Table, f filter, shard, cursorText string) error {
	if shard != "" {
		sh, err := s.shardNamed("shard", shard)
		if err != nil {
			return err
		}
		if cursorText != "" {
			if f.before, err = parseInt("cursor", cursorText, 1, maxItemID); err != nil {
				return invalid("cursor", "%q is not a cursor of this API (pass next_cursor of the previous page as it is)", cursorText)
			}
		}
		page, err := s.opList(r.Context(), sh, t, f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, listPage{Items: page.Items, NextCursor: cursor(page.Next)})
		return nil
	}
	if cursorText != "" {
		if _, err := shardlist.ParseCursor(cursorText); err != nil {
			return invalid("cursor", "%q is not a cursor of this API (%s)", cursorText, strings.TrimPrefix(err.Error(), shardlist.ErrBadCursor.Error()+": "))
		}
	}
	items, next, err := s.opListMerged(r.Context(), t, f, cursorText)
	if err != nil {
		return err
	}
	out := listPage{Items: items}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
