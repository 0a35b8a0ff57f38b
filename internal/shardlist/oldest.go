package shardlist

import (
	"fmt"
	"strings"

	"github.com/workq/workq/internal/admin"
)

// An oldest-first list (admin.Filter.Oldest) merges the shards' pages
// oldest first, and its cursor holds each shard's position upwards: the
// id above which it goes on (0: done; absent: from its oldest). Its text
// starts with OldestPrefix, which is not base64, so that neither order
// takes the other's cursor (ParseCursor refuses it).

// OldestPrefix starts the text of an oldest-first list's cursor.
const OldestPrefix = "o."

// Format is c's text for a list of the order oldest says.
func (c Cursor) Format(oldest bool) string {
	if oldest {
		return OldestPrefix + c.String()
	}
	return c.String()
}

// ParseOrdered reads the text of a cursor of a list of the order oldest
// says (Format); a cursor of the other order is an error wrapping
// ErrBadCursor.
func ParseOrdered(v string, oldest bool) (Cursor, error) {
	text, isOldest := strings.CutPrefix(v, OldestPrefix)
	if isOldest != oldest {
		which := "newest-first"
		if isOldest {
			which = "oldest-first"
		}
		return nil, errorf("it is the cursor of an %s list: pass it with that order", which)
	}
	return ParseCursor(text)
}

// Older orders an oldest-first merged list: created earlier first, then
// by shard name and id.
func Older(a, b admin.Item) bool {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c < 0
	}
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	return a.ID < b.ID
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadCursor}, args...)...)
}
