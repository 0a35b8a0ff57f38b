package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// DefaultShard names the one database of an API without Options.Shards
// (workq.DefaultShard): its items carry no shard, and a shard parameter
// may name it so.
const DefaultShard = "default"

// Shard is one database of a sharded workq (workq.NewShardedClient): its
// name, as the Client's, and a DB on it. See Options.Shards.
type Shard struct {
	Name string
	DB   workqtype.TxDB
}

// setShards checks o.Shards and wraps each DB in the schema; with none, the
// one shard is o.DB, unnamed.
func (s *Server) setShards(rw dbschema.Rewriter) error {
	if len(s.o.Shards) == 0 {
		s.shards = []Shard{{DB: s.o.DB}}
		return nil
	}
	seen := map[string]bool{}
	for _, sh := range s.o.Shards {
		switch {
		case !workqtype.ValidName(sh.Name):
			return fmt.Errorf("api: %w", workqtype.Invalid("Shards", fmt.Sprintf("shard name %q is not a valid name (%s)", sh.Name, workqtype.NameRule)))
		case seen[sh.Name]:
			return fmt.Errorf("api: %w", workqtype.Invalid("Shards", fmt.Sprintf("shard %q is given twice", sh.Name)))
		case sh.DB == nil:
			return fmt.Errorf("api: %w", workqtype.Invalid("Shards", fmt.Sprintf("shard %q has no DB", sh.Name)))
		}
		seen[sh.Name] = true
		s.shards = append(s.shards, Shard{Name: sh.Name, DB: rw.WrapTx(sh.DB)})
	}
	return nil
}

// sharded reports whether the server serves several shards.
func (s *Server) sharded() bool { return len(s.shards) > 1 }

// shardNamed returns the shard called name: "" is the only one of an
// unsharded server, and required on a sharded one (field names where it
// was given: the shard query parameter or body member).
func (s *Server) shardNamed(field, name string) (Shard, error) {
	if name == "" {
		if s.sharded() {
			return Shard{}, invalid(field, "required: this API serves several shards (%s); name the item's", s.shardNames())
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
	return Shard{}, notFound("no shard %q (the shards are %s)", name, s.shardNames())
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

// tag sets the shard of each item (nothing for an unnamed one).
func tag(items []admin.Item, shard string) []admin.Item {
	for i := range items {
		items[i].Shard = shard
	}
	return items
}

// listShards are the shards for internal/shardlist.
func (s *Server) listShards() []shardlist.Shard {
	out := make([]shardlist.Shard, len(s.shards))
	for i, sh := range s.shards {
		out[i] = shardlist.Shard{Name: sh.Name, DB: sh.DB}
	}
	return out
}

func parseShardCursor(field, v string) (shardlist.Cursor, error) {
	c, err := shardlist.ParseCursor(v)
	if err != nil {
		return nil, invalid(field, "%q is not a cursor of this API (%s)", v, strings.TrimPrefix(err.Error(), shardlist.ErrBadCursor.Error()+": "))
	}
	return c, nil
}

// listMerged is one page of the items of every shard matching f
// (internal/shardlist.List, which the dashboard shares): each shard's page
// from its position, merged newest first (created_at, then shard and id),
// each item tagged with its shard. The cursor holds every shard's
// position, so a page never repeats or skips an item of a shard.
func (s *Server) listMerged(ctx context.Context, t lease.Table, f admin.Filter, cur shardlist.Cursor) (listPage, error) {
	page, err := shardlist.List(ctx, s.listShards(), t, f, cur, shardlist.Options{})
	if err != nil {
		return listPage{}, err
	}
	out := listPage{Items: page.Items}
	if page.Next != nil {
		c := page.Next.String()
		out.NextCursor = &c
	}
	return out, nil
}

// listItemsSharded serves GET /v1/tables/{table}/items on a sharded
// server: ?shard=NAME lists one shard (its own cursor), else every shard
// merged.
func (s *Server) listItemsSharded(w http.ResponseWriter, r *http.Request, t lease.Table, f admin.Filter, shard, cursorText string) error {
	if shard != "" {
		sh, err := s.shardNamed("shard", shard)
		if err != nil {
			return err
		}
		if cursorText != "" {
			if f.Before, err = parseInt("cursor", cursorText, 1, lease.MaxItemID); err != nil {
				return invalid("cursor", "%q is not a cursor of this API (pass next_cursor of the previous page as it is)", cursorText)
			}
		}
		page, err := admin.List(r.Context(), sh.DB, t, f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, listPage{Items: tag(page.Items, sh.Name), NextCursor: cursor(page.Next)})
		return nil
	}
	cur := shardlist.Cursor{}
	if cursorText != "" {
		var err error
		if cur, err = parseShardCursor("cursor", cursorText); err != nil {
			return err
		}
	}
	page, err := s.listMerged(r.Context(), t, f, cur)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// placed returns the shard that new items with these route keys go to
// ("" keys go anywhere): the shard of their keys, the same as
// workq.NewShardedClient's (workqtype.ShardIndex), or for items without
// one the next shard in turn. A request whose keys go to several shards is
// refused: send a request per shard.
func (s *Server) placed(keys []string) (Shard, error) {
	if !s.sharded() {
		return s.shards[0], nil
	}
	names := make([]string, len(s.shards))
	for i, sh := range s.shards {
		names[i] = sh.Name
	}
	at := -1
	for i, k := range keys {
		if k == "" {
			continue
		}
		j := workqtype.ShardIndex(names, k)
		if at >= 0 && j != at {
			return Shard{}, invalid(join(prefix(i), "key"), "this item's key goes to shard %s, an earlier item's to %s: "+
				"a batch goes to one shard, send one per shard", names[j], names[at])
		}
		at = j
	}
	if at < 0 {
		at = int((s.rr.Add(1) - 1) % uint64(len(s.shards)))
	}
	return s.shards[at], nil
}
