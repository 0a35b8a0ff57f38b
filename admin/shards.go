package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/workq/workq/lease"
	"github.com/workq/workq/workqtype"
)

// Shard is one database of a sharded workq (workq.NewShardedClient): its
// name and a DB on it, in the workq schema.
type Shard struct {
	Name string
	DB   workqtype.DB
}

// ShardPage is one page of the items of several shards.
type ShardPage struct {
	Items []Item // newest first, each with its Shard
	// Next is the cursor of the next page ("" after the last): every
	// shard's position, opaque.
	Next string
}

// shardCursor is the position of a merged list in every shard: the id
// below which it goes on (0: the shard is done). A shard missing from it
// starts from its newest item.
type shardCursor map[string]int64

func (c shardCursor) String() string {
	b, _ := json.Marshal(map[string]int64(c))
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseShardCursor(v string) (shardCursor, error) {
	c := shardCursor{}
	if v == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err == nil {
		for name, id := range c {
			if id < 0 || id > lease.MaxItemID {
				err = fmt.Errorf("shard %s at %d", name, id)
			}
		}
	}
	if err != nil {
		return nil, workqtype.Invalid("cursor", fmt.Sprintf("%q is not a cursor of this list (pass the previous page's as it is)", v))
	}
	return c, nil
}

// ListShards is List over several shards: each shard's page from its
// position in cursor ("" for the first page), merged newest first
// (created_at, then shard name and id), each item tagged with its shard.
// What a page takes of a shard is always a prefix of that shard's page,
// so paging with Next visits every item of every shard once, as List does
// on one; f.Before is ignored (the cursor holds every shard's position).
func ListShards(ctx context.Context, shards []Shard, table lease.Table, f Filter, cursor string) (ShardPage, error) {
	cur, err := parseShardCursor(cursor)
	if err != nil {
		return ShardPage{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	type part struct {
		shard string
		items []Item
		next  int64 // the shard's own next position after its whole page
	}
	var parts []part
	for _, sh := range shards {
		g := f
		g.Before = 0
		if before, ok := cur[sh.Name]; ok {
			if before == 0 {
				continue // done
			}
			g.Before = before
		}
		page, err := List(ctx, sh.DB, table, g)
		if err != nil {
			return ShardPage{}, fmt.Errorf("shard %s: %w", sh.Name, err)
		}
		for i := range page.Items {
			page.Items[i].Shard = sh.Name
		}
		parts = append(parts, part{shard: sh.Name, items: page.Items, next: page.Next})
	}
	// A k-way merge of the shards' pages, newest head first.
	taken := []Item{}
	heads := make([]int, len(parts))
	for len(taken) < limit {
		best := -1
		for i, p := range parts {
			if heads[i] < len(p.items) && (best < 0 || newer(p.items[heads[i]], parts[best].items[heads[best]])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		taken = append(taken, parts[best].items[heads[best]])
		heads[best]++
	}
	// Each shard goes on below the last id taken of it.
	next := shardCursor{}
	for name, at := range cur {
		if at == 0 {
			next[name] = 0 // done before this page
		}
	}
	more := false
	for i, p := range parts {
		n := heads[i]
		switch {
		case n == 0 && len(p.items) > 0:
			if at, ok := cur[p.shard]; ok {
				next[p.shard] = at // nothing taken: where it was
			}
			more = true
		case n < len(p.items):
			next[p.shard] = p.items[n-1].ID
			more = true
		case p.next != 0:
			next[p.shard] = p.next
			more = true
		default:
			next[p.shard] = 0
		}
	}
	out := ShardPage{Items: taken}
	if more {
		out.Next = next.String()
	}
	return out, nil
}

// newer orders a merged list: created later first, then by shard name and
// id.
func newer(a, b Item) bool {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c > 0
	}
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	return a.ID > b.ID
}
