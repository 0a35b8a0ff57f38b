package kinds

import (
	"encoding/json"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// The helpers the kinds' row mappers share.

// setStatus sets the item's status and its kind's word for it (State).
// A done item shows no last error: last_error is the error of an earlier
// attempt that failed before one succeeded, which is not the item's error
// (it stays in the row, and every attempt's error is in Attempts).
func setStatus(it *workqtype.Item, s lease.Status, state string) {
	it.Status = s.String()
	it.State = state
	if s == lease.StatusDone {
		it.LastError = ""
	}
}

// detail records a table column that is set (a nil pointer is not).
func detail[T any](it *workqtype.Item, name string, v *T) {
	if v == nil {
		return
	}
	if it.Details == nil {
		it.Details = map[string]any{}
	}
	if raw, ok := any(v).(*[]byte); ok {
		it.Details[name] = json.RawMessage(*raw)
		return
	}
	it.Details[name] = *v
}

func mapRows[R any](rows []R, err error, item func(R) workqtype.Item) ([]workqtype.Item, error) {
	if err != nil {
		return nil, err
	}
	out := make([]workqtype.Item, len(rows))
	for i, r := range rows {
		out[i] = item(r)
	}
	return out, nil
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
