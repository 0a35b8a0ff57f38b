package main

import (
	"slices"
	"testing"

	"github.com/workq/workq/internal/kinds"
)

// Every kind of the registry has a command of its name, with its verbs.
func TestEveryKindHasACommand(t *testing.T) {
	var names []string
	for _, c := range newKindCmds() {
		names = append(names, c.Name())
		if len(c.Commands()) < 3 {
			t.Errorf("workq %s has %d subcommands, want its item verbs", c.Name(), len(c.Commands()))
		}
	}
	for _, k := range kinds.All() {
		if !slices.Contains(names, k.Name) {
			t.Errorf("kind %s (%s) has no command; got %v", k.Table, k.Name, names)
		}
	}
}

// A kind the CLI has no texts for (a fifth one) gets the generic verbs
// from its registry entry alone.
func TestNewKindGetsGenericVerbs(t *testing.T) {
	k := kinds.All()[0]
	k.Table, k.Name, k.Noun, k.RetryWord = "sagas", "sagas", "saga", "retry"
	got := itemKindsOf([]kinds.Kind{k})
	if len(got) != 1 {
		t.Fatalf("got %d kinds", len(got))
	}
	ik := got[0]
	if ik.command != "sagas" || ik.what != "saga" || ik.table != "sagas" {
		t.Fatalf("registry fields not taken: %+v", ik)
	}
	for name, v := range map[string]verbText{"list": ik.list, "show": ik.show, "retry": ik.retry, "cancel": ik.cancel, "delete": ik.delete} {
		if v.use == "" || v.short == "" {
			t.Errorf("generic %s verb missing: %+v", name, v)
		}
	}
}
