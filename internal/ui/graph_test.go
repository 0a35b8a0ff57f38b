package ui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/workq/workq"
)

// graphLayers: a task's layer is 1 + the largest of its dependencies',
// whatever the order the tasks were added in; a chain of 20,000 tasks is
// layered without recursion; the drawing puts each layer in its column.
func TestGraphLayers(t *testing.T) {
	task := func(name string, deps []string, anyOutcome ...string) workq.WorkflowTask {
		return workq.WorkflowTask{Name: name, DependsOn: deps, DependsOnAnyOutcome: anyOutcome}
	}
	// A diamond with a tail, added out of order; "late" depends on a task
	// added after it, "clean" on b whatever its outcome.
	tasks := []workq.WorkflowTask{
		task("late", []string{"d"}),
		task("a", nil),
		task("b", []string{"a"}),
		task("c", []string{"a"}),
		task("d", []string{"b", "c"}),
		task("clean", nil, "b"),
		task("alone", nil),
	}
	layer, _ := graphLayers(tasks)
	if got := fmt.Sprint(layer); got != "[3 0 1 1 2 2 0]" {
		t.Errorf("layers %s, want [3 0 1 1 2 2 0]", got)
	}

	const n = 20000
	chain := make([]workq.WorkflowTask, n)
	chain[0] = task("t0", nil)
	for i := 1; i < n; i++ {
		chain[i] = task(fmt.Sprintf("t%d", i), []string{fmt.Sprintf("t%d", i-1)})
	}
	layer, _ = graphLayers(chain)
	for i, l := range layer {
		if l != i {
			t.Fatalf("t%d is in layer %d", i, l)
		}
	}

	svg := string(drawGraph(tasks, "../", ""))
	// "d" is in layer 2: its box starts two columns right of the first.
	if want := fmt.Sprintf(`data-task="d"><title>d:  (job run 0)</title><rect x="%d" y=`, graphPad+2*graphColW); !strings.Contains(svg, want) {
		t.Errorf("d is not in the third column (%s):\n%s", want, svg)
	}
	if strings.Count(svg, `<path class="edge"`) != 5 || strings.Count(svg, `<path class="edge any"`) != 1 {
		t.Errorf("want 5 solid edges and 1 dashed:\n%s", svg)
	}
}
