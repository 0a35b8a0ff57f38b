package ui

import (
	"cmp"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/workq/workq"
)

// The geometry of a workflow's drawing, in SVG user units (pixels).
const (
	graphPad   = 12
	nodeW      = 184
	nodeH      = 38
	graphColW  = 244 // a layer's column: a node and the gap its edges cross
	graphRowH  = 50
	nodeLabelN = 24 // characters of a task's name in its box (its title has all)
)

// graphLayers is each task's layer: 0 for a task without dependencies
// among tasks, else 1 + the largest layer of its dependencies. It is
// computed in topological order (Kahn's algorithm: a task is placed once
// every dependency is), iteratively, so a deep chain costs no stack.
// Dependencies on tasks not in tasks are ignored; a task on a cycle (which
// EnqueueWorkflow refuses) keeps the layer its placed dependencies gave.
func graphLayers(tasks []workq.WorkflowTask) (layer []int, deps [][]int) {
	n := len(tasks)
	idx := make(map[string]int, n)
	for i, t := range tasks {
		idx[t.Name] = i
	}
	deps = make([][]int, n)
	dependents := make([][]int, n)
	waiting := make([]int, n)
	for i, t := range tasks {
		for _, name := range slices.Concat(t.DependsOn, t.DependsOnAnyOutcome) {
			j, ok := idx[name]
			if !ok || j == i {
				continue
			}
			deps[i] = append(deps[i], j)
			dependents[j] = append(dependents[j], i)
			waiting[i]++
		}
	}
	layer = make([]int, n)
	queue := make([]int, 0, n)
	for i := range tasks {
		if waiting[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, k := range dependents[i] {
			layer[k] = max(layer[k], layer[i]+1)
			if waiting[k]--; waiting[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	return layer, deps
}

// drawGraph draws tasks as an SVG: one column per layer (graphLayers),
// left to right; in a column the tasks are ordered by the mean row of
// their dependencies (fewer crossings), then as added. A task is a box of
// its state's colour with its name and state, a link to its job's item
// page; an edge goes from a dependency to its dependent, dashed when the
// dependent runs after it whatever its outcome (DependsOnAnyOutcome).
// root is the page's way to the dashboard's root, shard the workflow's on
// a sharded dashboard ("" unsharded). No tasks: no drawing.
func drawGraph(tasks []workq.WorkflowTask, root, shard string) template.HTML {
	if len(tasks) == 0 {
		return ""
	}
	layer, deps := graphLayers(tasks)
	layers := 0
	for _, l := range layer {
		layers = max(layers, l+1)
	}
	cols := make([][]int, layers)
	for i, l := range layer {
		cols[l] = append(cols[l], i)
	}
	row := make([]int, len(tasks))
	rows := 0
	for l, col := range cols {
		if l > 0 {
			mean := func(i int) float64 {
				if len(deps[i]) == 0 {
					return 0
				}
				s := 0
				for _, j := range deps[i] {
					s += row[j]
				}
				return float64(s) / float64(len(deps[i]))
			}
			slices.SortStableFunc(col, func(a, b int) int { return cmp.Compare(mean(a), mean(b)) })
		}
		for r, i := range col {
			row[i] = r
		}
		rows = max(rows, len(col))
	}
	x := func(i int) int { return graphPad + layer[i]*graphColW }
	y := func(i int) int { return graphPad + row[i]*graphRowH }
	width := 2*graphPad + (layers-1)*graphColW + nodeW
	height := 2*graphPad + (rows-1)*graphRowH + nodeH

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="wf-graph" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" aria-labelledby="graph-h">`,
		width, height, width, height)
	b.WriteString(`<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">` +
		`<path d="M0,0 L10,5 L0,10 z" fill="#4a5360"/></marker></defs>`)
	idx := make(map[string]int, len(tasks))
	for i, t := range tasks {
		idx[t.Name] = i
	}
	edge := func(from string, to int, anyOutcome bool) {
		j, ok := idx[from]
		if !ok || j == to {
			return
		}
		x1, y1 := x(j)+nodeW, y(j)+nodeH/2
		x2, y2 := x(to), y(to)+nodeH/2
		var d string
		if layer[to]-layer[j] <= 1 {
			dx := (x2 - x1) / 2
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1+dx, y1, x2-dx, y2, x2, y2)
		} else {
			// Past a column: along the gap below the dependency's row,
			// which no box takes, so the edge is never hidden behind a
			// box and mistaken for that box's.
			h := (graphColW - nodeW) / 2
			gy := y(j) + nodeH + (graphRowH-nodeH)/2
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d L%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1+h/2, y1, x1+h/2, gy, x1+h, gy,
				x2-h, gy, x2-h/2, gy, x2-h/2, y2, x2, y2)
		}
		class, dash := "edge", ""
		if anyOutcome {
			class, dash = "edge any", ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<path class="%s" data-from="%s" data-to="%s" d="%s" fill="none" stroke="#4a5360"%s marker-end="url(#wf-arrow)"/>`,
			class, esc(from), esc(tasks[to].Name), d, dash)
	}
	for i, t := range tasks {
		for _, d := range t.DependsOn {
			edge(d, i, false)
		}
		for _, d := range t.DependsOnAnyOutcome {
			edge(d, i, true)
		}
	}
	for i, t := range tasks {
		href := root + "items/" + string(workq.TableJobRuns) + "/" + strconv.FormatInt(t.JobID, 10)
		if shard != "" {
			href += "?shard=" + url.QueryEscape(shard)
		}
		fmt.Fprintf(&b, `<a class="node s-%s" href="%s" data-task="%s"><title>%s: %s (job run %d)</title>`+
			`<rect x="%d" y="%d" width="%d" height="%d" rx="4"/>`+
			`<text x="%d" y="%d" class="name">%s</text><text x="%d" y="%d" class="st">%s</text></a>`,
			esc(string(t.State)), esc(href), esc(t.Name), esc(t.Name), esc(string(t.State)), t.JobID,
			x(i), y(i), nodeW, nodeH,
			x(i)+8, y(i)+16, esc(truncate(nodeLabelN, t.Name)), x(i)+8, y(i)+31, esc(strings.ReplaceAll(string(t.State), "_", " ")))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped
}

func esc(s string) string { return template.HTMLEscapeString(s) }
