package kinds_test

import (
	"go/build"
	"slices"
	"strings"
	"testing"

	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Every work table has exactly one kind, and the kinds are the engine's
// tables in the engine's order.
func TestEveryTableHasOneKind(t *testing.T) {
	all := kinds.All()
	for _, table := range []workqtype.Table{workqtype.TableJobRuns, workqtype.TableOutbox, workqtype.TableInbox, workqtype.TableTimers} {
		n := 0
		for _, k := range all {
			if k.Table == table {
				n++
			}
		}
		if n != 1 {
			t.Errorf("table %s has %d kinds, want 1", table, n)
		}
		if k, ok := kinds.Of(table); !ok || k.Table != table {
			t.Errorf("Of(%s) = %v, %v", table, k.Table, ok)
		}
	}
	if got, want := kinds.Tables(), lease.Tables; !slices.Equal(got, want) {
		t.Errorf("kinds' tables %v, lease's tables %v: want the same, in the same order", got, want)
	}
	for _, table := range lease.Tables {
		if _, ok := kinds.Of(table); !ok {
			t.Errorf("lease table %s has no kind", table)
		}
	}
	for _, k := range all {
		if _, err := lease.ParseTable(string(k.Table)); err != nil {
			t.Errorf("kind %s: %v", k.Name, err)
		}
	}
	if _, ok := kinds.Of("nope"); ok {
		t.Error("Of(nope) found a kind")
	}
	if got := kinds.TableList(); got != "job_runs, outbox, inbox, timers" {
		t.Errorf("TableList() = %q", got)
	}
}

// Every kind's words are set, and its name, title and noun are its own.
func TestKindsAreComplete(t *testing.T) {
	want := map[workqtype.Table][5]string{ // name, title, noun, kind label, claimed kind
		workqtype.TableJobRuns: {"jobs", "Job runs", "job run", "kind", "kind"},
		workqtype.TableOutbox:  {"outbox", "Outbox", "outbox message", "topic", "topic"},
		workqtype.TableInbox:   {"inbox", "Inbox", "inbox message", "topic", "source"},
		workqtype.TableTimers:  {"timers", "Timers", "timer", "topic", "topic"},
	}
	names, titles, nouns := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, k := range kinds.All() {
		if w, ok := want[k.Table]; ok {
			if got := [5]string{k.Name, k.Title, k.Noun, k.KindLabel, k.ClaimedKind}; got != w {
				t.Errorf("kind %s: %q, want %q", k.Table, got, w)
			}
		}
		if k.Name == "" || k.Title == "" || k.Noun == "" || strings.ContainsAny(k.Name, " /") {
			t.Errorf("kind %s: name %q, title %q, noun %q", k.Table, k.Name, k.Title, k.Noun)
		}
		if k.KindLabel != "kind" && k.KindLabel != "topic" {
			t.Errorf("kind %s: KindLabel %q", k.Table, k.KindLabel)
		}
		if !slices.Contains([]string{"kind", "topic", "source"}, k.ClaimedKind) {
			t.Errorf("kind %s: ClaimedKind %q", k.Table, k.ClaimedKind)
		}
		if k.State == nil || k.Page == nil || k.Get == nil {
			t.Errorf("kind %s: State, Page and Get must all be set", k.Table)
		}
		for seen, v := range map[*map[string]bool]string{&names: k.Name, &titles: k.Title, &nouns: k.Noun} {
			if (*seen)[v] {
				t.Errorf("kind %s: %q is another kind's too", k.Table, v)
			}
			(*seen)[v] = true
		}
		if got, ok := kinds.ByName(k.Name); !ok || got.Table != k.Table {
			t.Errorf("ByName(%q) = %s, %v", k.Name, got.Table, ok)
		}
		if k.String() != string(k.Table) {
			t.Errorf("String() = %q", k.String())
		}
	}
	if _, ok := kinds.ByName("job_runs"); ok {
		t.Error("ByName takes the kind's name, not its table's")
	}
	// Only job runs have metadata; the inbox keeps its finished messages
	// for its window.
	for _, k := range kinds.All() {
		if k.HasMetadata != (k.Table == workqtype.TableJobRuns) || k.OwnRetention != (k.Table == workqtype.TableInbox) {
			t.Errorf("kind %s: HasMetadata %v, OwnRetention %v", k.Table, k.HasMetadata, k.OwnRetention)
		}
	}
}

// A kind's state words round-trip: State names each status with the word
// at its place in States, and ParseState reads that word and the lease
// name back to the status.
func TestStateWordsRoundTrip(t *testing.T) {
	for _, k := range kinds.All() {
		want := len(kinds.Statuses)
		if k.Table != workqtype.TableJobRuns {
			want-- // pending, the last: a workflow's task, job runs only
		}
		if len(k.States) != want {
			t.Fatalf("kind %s: %d state words %v, want one per status it has (%d)", k.Table, len(k.States), k.States, want)
		}
		for i, s := range kinds.Statuses[:want] {
			word := k.State(s)
			if word != k.States[i] {
				t.Errorf("kind %s: State(%s) = %q, States[%d] = %q", k.Table, s, word, i, k.States[i])
			}
			for _, w := range []string{word, s.String()} {
				if got, ok := k.ParseState(w); !ok || got != s {
					t.Errorf("kind %s: ParseState(%q) = %s, %v, want %s", k.Table, w, got, ok, s)
				}
				if got, ok := kinds.ParseState(w); !ok || got != s {
					t.Errorf("ParseState(%q) = %s, %v, want %s", w, got, ok, s)
				}
			}
		}
		if _, ok := k.ParseState("nope"); ok {
			t.Errorf("kind %s: ParseState(nope) read a status", k.Table)
		}
	}
	if got := kinds.StatusNames; !slices.Equal(got, []string{"ready", "in_progress", "done", "failed", "cancelled", "pending"}) {
		t.Errorf("StatusNames = %v", got)
	}
	if got := kinds.OwnWords(); !slices.Equal(got, []string{"processing", "processed", "dead"}) {
		t.Errorf("OwnWords() = %v", got)
	}
	// A word of one kind is not another's: the inbox's "dead" is not a
	// job run's state, though a filter over every kind takes it.
	jobs, _ := kinds.Of(workqtype.TableJobRuns)
	if _, ok := jobs.ParseState("dead"); ok {
		t.Error("job runs take the inbox's word dead")
	}
}

// All returns a new slice: a caller's change does not reach the registry.
func TestAllIsACopy(t *testing.T) {
	a := kinds.All()
	a[0].Name = "changed"
	if kinds.All()[0].Name == "changed" {
		t.Error("All returned the registry itself")
	}
}

// The registry is below every layer that uses it: it imports none of them.
func TestImportsNoLayerAbove(t *testing.T) {
	const mod = "github.com/workq/workq"
	banned := []string{mod, mod + "/internal/admin", mod + "/api", mod + "/internal/ui", mod + "/cmd/"}
	seen := map[string]bool{}
	var walk func(path, dir string)
	walk = func(path, dir string) {
		if seen[path] || (path != mod && !strings.HasPrefix(path, mod+"/")) {
			return
		}
		seen[path] = true
		for _, b := range banned {
			if path == b || (strings.HasSuffix(b, "/") && strings.HasPrefix(path, b)) {
				t.Errorf("internal/kinds imports %s", path)
			}
		}
		p, err := build.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, imp := range p.Imports {
			walk(imp, p.Dir)
		}
	}
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen[mod+"/internal/kinds"] = true
	for _, imp := range p.Imports {
		walk(imp, p.Dir)
	}
}

// Of is on the worker's path (a claimed message's fill, the middleware's
// WorkInfo, the tracer's carrier): it must not allocate.
func TestOfDoesNotAllocate(t *testing.T) {
	var k kinds.Kind
	if n := testing.AllocsPerRun(100, func() { k, _ = kinds.Of(workqtype.TableTimers) }); n != 0 {
		t.Errorf("Of allocates %v times", n)
	}
	_ = k
}

func BenchmarkOf(b *testing.B) {
	for range b.N {
		if _, ok := kinds.Of(workqtype.TableTimers); !ok {
			b.Fatal("no timers")
		}
	}
}
