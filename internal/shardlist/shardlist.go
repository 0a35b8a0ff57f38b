// Package shardlist is the merged listing of the items of several shards
// (databases of a sharded workq), shared by the HTTP API's item endpoints
// and the dashboard's item pages: one page of every shard's items, newest
// first, each tagged with its shard, and one cursor holding every shard's
// position, so that paging never repeats or skips an item of a shard.
package shardlist

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Shard is one database and its name ("" for the one database of an
// unsharded server: its items carry no shard).
type Shard struct {
	Name string
	DB   workqtype.DB
}

// Cursor is the position of a merged list in every shard: the id below
// which it goes on (0: the shard is done). A shard missing from it starts
// from its newest item.
type Cursor map[string]int64

// String is the cursor as an opaque URL-safe text (ParseCursor reads it).
func (c Cursor) String() string {
	b, _ := json.Marshal(map[string]int64(c))
	return base64.RawURLEncoding.EncodeToString(b)
}

// ErrBadCursor is wrapped by ParseCursor's errors.
var ErrBadCursor = errors.New("not a cursor of this list")

// ParseCursor reads a Cursor's String. Its errors wrap ErrBadCursor and
// say what is wrong in words fit for a message's parenthesis.
func ParseCursor(v string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	var c Cursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: pass next_cursor of the previous page as it is", ErrBadCursor)
	}
	for name, id := range c {
		if id < 0 || id > lease.MaxItemID {
			return nil, fmt.Errorf("%w: shard %s at %d", ErrBadCursor, name, id)
		}
	}
	return c, nil
}

// Options tune List.
type Options struct {
	// Timeout bounds each shard's page (0: only ctx bounds it).
	Timeout time.Duration
	// Tolerate lists the shards that answer when some do not: those are
	// reported in Page.Down, and keep their position in Page.Next. Without
	// it the first shard's error is List's.
	Tolerate bool
}

// Down is a shard that did not answer, and why.
type Down struct {
	Shard string
	Err   error
}

// Page is one page of a merged list.
type Page struct {
	Items []admin.Item // newest first, each tagged with its shard
	// Next is the position after this page (nil on the last page, unless a
	// shard was down: then it holds that shard's unchanged position for
	// the next page to try again).
	Next Cursor
	Down []Down // the shards that did not answer (Options.Tolerate)
}

// List is one page of the items of every shard matching f (f.Limit items,
// admin.DefaultLimit if 0; f.Before is ignored: cur holds each shard's
// position). Each shard's page is read at once, in parallel, from its
// position, and the pages are merged newest first (created_at, then shard
// name and id).
func List(ctx context.Context, shards []Shard, t lease.Table, f admin.Filter, cur Cursor, o Options) (Page, error) {
	limit := f.Limit
	if limit == 0 {
		limit = admin.DefaultLimit
	}
	type part struct {
		shard string
		items []admin.Item
		next  int64 // the shard's own next position after its whole page
		err   error
		read  bool
	}
	parts := make([]part, len(shards))
	var read []Shard
	for i, sh := range shards {
		parts[i].shard = sh.Name
		if before, ok := cur[sh.Name]; ok && before == 0 {
			continue // done
		}
		parts[i].read = true
		read = append(read, sh)
	}
	pages := Each(ctx, read, o.Timeout, func(ctx context.Context, sh Shard) (admin.Page, error) {
		g := f
		if f.Oldest {
			g.After = cur[sh.Name] // 0 (absent): from its oldest
		} else {
			g.Before = cur[sh.Name] // 0 (absent): from its newest
		}
		return admin.List(ctx, sh.DB, t, g)
	})
	for i, j := 0, 0; i < len(parts); i++ {
		if !parts[i].read {
			continue
		}
		a := pages[j]
		j++
		parts[i].err = a.Err
		if a.Err == nil {
			parts[i].items, parts[i].next = tag(a.Value.Items, a.Shard), a.Value.Next
		}
	}

	var out Page
	live := parts[:0:0]
	for _, p := range parts {
		switch {
		case !p.read:
		case p.err != nil && (!o.Tolerate || errors.Is(p.err, workqtype.ErrInvalid)):
			if p.shard == "" {
				return Page{}, p.err
			}
			return Page{}, fmt.Errorf("shard %s: %w", p.shard, p.err)
		case p.err != nil:
			out.Down = append(out.Down, Down{Shard: p.shard, Err: p.err})
		default:
			live = append(live, p)
		}
	}
	// A k-way merge of the shards' pages, newest head first: what the page
	// takes of a shard is always a prefix of that shard's page (in its id
	// order), whatever its created_at order.
	out.Items = []admin.Item{}
	heads := make([]int, len(live))
	first := Newer
	if f.Oldest {
		first = Older
	}
	for len(out.Items) < limit {
		best := -1
		for i, p := range live {
			if heads[i] == len(p.items) {
				continue
			}
			if best < 0 || first(p.items[heads[i]], live[best].items[heads[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out.Items = append(out.Items, live[best].items[heads[best]])
		heads[best]++
	}
	// Each shard goes on below the last id the page took of it.
	next := Cursor{}
	more := false
	for i, p := range live {
		n := heads[i]
		switch {
		case n < len(p.items):
			if n > 0 {
				next[p.shard] = p.items[n-1].ID
			} else if before, ok := cur[p.shard]; ok {
				next[p.shard] = before
			} // else: from its newest again
			more = true
		case p.next != 0:
			next[p.shard] = p.next
			more = true
		case f.Oldest:
			// Read to its end, it goes on above the last id it gave, not
			// done: an item written there meanwhile comes on a later page
			// (newest first, new items come before the cursor, never after).
			if n > 0 {
				next[p.shard] = p.items[n-1].ID
			} else if after, ok := cur[p.shard]; ok {
				next[p.shard] = after
			} // else: from its oldest again
		default:
			next[p.shard] = 0
		}
	}
	for _, d := range out.Down { // tried again from where it was
		if before, ok := cur[d.Shard]; ok {
			next[d.Shard] = before
		}
		more = true
	}
	for _, p := range parts { // those done before this page stay done
		if !p.read {
			next[p.shard] = 0
		}
	}
	if more {
		out.Next = next
	}
	return out, nil
}

// tag sets the shard of each item.
func tag(items []admin.Item, shard string) []admin.Item {
	for i := range items {
		items[i].Shard = shard
	}
	return items
}

// Newer orders a merged list: created later first, then by shard name and
// id.
func Newer(a, b admin.Item) bool {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c > 0
	}
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	return a.ID > b.ID
}
