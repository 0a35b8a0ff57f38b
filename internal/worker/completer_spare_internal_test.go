package worker

import (
	"testing"

	"github.com/workq/workq/internal/lease"
)

// A flush's slices are kept for later flushes: a reused batch holds exactly
// the completions taken, in order, and a kept slice holds nothing of the
// flush that used it.
func TestCompleterReusesFlushSlices(t *testing.T) {
	c := &completer{max: 3, spareBatches: make(chan []pendingCompletion, 3), spareCS: make(chan []lease.Completion, 2)}
	item := func(id int64) pendingCompletion {
		return pendingCompletion{c: lease.Completion{ID: id}, item: &lease.Item{ID: id}}
	}
	ids := func(b []pendingCompletion) []int64 {
		var out []int64
		for _, p := range b {
			out = append(out, p.c.ID)
		}
		return out
	}
	c.queue = []pendingCompletion{item(1), item(2), item(3), item(4)}
	first := c.take()
	if got := ids(first); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("first batch %v; want [1 2 3]", got)
	}
	cs := []lease.Completion{{ID: 1, Output: []byte(`{}`)}, {ID: 2}, {ID: 3}}
	c.recycle(first, cs)
	kept := <-c.spareBatches
	if len(kept) != 0 || cap(kept) < 3 {
		t.Fatalf("kept batch len %d cap %d; want empty with room for 3", len(kept), cap(kept))
	}
	for i, p := range kept[:3] {
		if p.item != nil || p.c.ID != 0 {
			t.Errorf("kept batch entry %d not cleared: %+v", i, p)
		}
	}
	keptCS := <-c.spareCS
	if len(keptCS) != 0 || cap(keptCS) < 3 {
		t.Fatalf("kept completions len %d cap %d; want empty with room for 3", len(keptCS), cap(keptCS))
	}
	for i, cp := range keptCS[:3] {
		if cp.ID != 0 || cp.Output != nil {
			t.Errorf("kept completion %d not cleared: %+v", i, cp)
		}
	}
	c.spareBatches <- kept
	second := c.take()
	if got := ids(second); len(got) != 1 || got[0] != 4 || second[0].item.ID != 4 {
		t.Fatalf("second batch %v; want [4]", got)
	}
	if &second[:1][0] != &kept[:1][0] {
		t.Error("take allocated a new batch although a kept one had room")
	}
	if len(c.queue) != 0 {
		t.Errorf("queue left %d; want 0", len(c.queue))
	}
}
