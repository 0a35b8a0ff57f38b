package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/lease"
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

// shardCursor is the position of a merged list in every shard: the id
// below which it goes on (0: the shard is done). A shard missing from it
// starts from its newest item.
type shardCursor map[string]int64

func (c shardCursor) String() string {
	b, _ := json.Marshal(map[string]int64(c))
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseShardCursor(field, v string) (shardCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	var c shardCursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return nil, invalid(field, "%q is not a cursor of this API (pass next_cursor of the previous page as it is)", v)
	}
	for name, id := range c {
		if id < 0 || id > lease.MaxItemID {
			return nil, invalid(field, "%q is not a cursor of this API (shard %s at %d)", v, name, id)
		}
	}
	return c, nil
}

// listMerged is one page of the items of every shard matching f: each
// shard's page from its position, merged newest first (created_at, then
// shard and id), each item tagged with its shard. The cursor holds every
// shard's position, so a page never repeats or skips an item of a shard.
func (s *Server) listMerged(ctx context.Context, t lease.Table, f admin.Filter, cur shardCursor) (listPage, error) {
	limit := f.Limit
	if limit == 0 {
		limit = admin.DefaultLimit
	}
	type part struct {
		shard string
		items []admin.Item
		next  int64 // the shard's own next position after its whole page
	}
	var parts []part
	for _, sh := range s.shards {
		g := f
		if before, ok := cur[sh.Name]; ok {
			if before == 0 {
				continue // done
			}
			g.Before = before
		}
		page, err := admin.List(ctx, sh.DB, t, g)
		if err != nil {
			return listPage{}, fmt.Errorf("shard %s: %w", sh.Name, err)
		}
		parts = append(parts, part{shard: sh.Name, items: tag(page.Items, sh.Name), next: page.Next})
	}
	// A k-way merge of the shards' pages, newest head first: what the page
	// takes of a shard is always a prefix of that shard's page (in its id
	// order), whatever its created_at order.
	taken := []admin.Item{}
	heads := make([]int, len(parts))
	for len(taken) < limit {
		best := -1
		for i, p := range parts {
			if heads[i] == len(p.items) {
				continue
			}
			if best < 0 || newer(p.items[heads[i]], parts[best].items[heads[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		taken = append(taken, parts[best].items[heads[best]])
		heads[best]++
	}
	// Each shard's page is in id order: what the page took of a shard is a
	// prefix of it, and the shard goes on below the last id taken.
	next := shardCursor{}
	more := false
	for i, p := range parts {
		n := heads[i]
		switch {
		case n < len(p.items):
			if n == 0 {
				next[p.shard] = cur[p.shard]
				if _, ok := cur[p.shard]; !ok {
					delete(next, p.shard) // from its newest again
				}
			} else {
				next[p.shard] = p.items[n-1].ID
			}
			more = true
		case p.next != 0:
			next[p.shard] = p.next
			more = true
		default:
			next[p.shard] = 0
		}
	}
	for _, sh := range s.shards { // those done before this page stay done
		if cur[sh.Name] == 0 {
			if _, ok := cur[sh.Name]; ok {
				next[sh.Name] = 0
			}
		}
	}
	out := listPage{Items: taken}
	if more {
		c := next.String()
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
	cur := shardCursor{}
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

// newer orders a merged list: created later first, then by shard name and
// id.
func newer(a, b admin.Item) bool {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c > 0
	}
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	return a.ID > b.ID
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
