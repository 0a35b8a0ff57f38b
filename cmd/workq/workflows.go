package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
)

// `workq workflows`: workflows (docs/go.md, "Workflows") through the
// Client's NewWorkflow, AddToWorkflow, ListWorkflows, GetWorkflow,
// WorkflowTasks, WaitWorkflow, CancelWorkflow and RetryWorkflow, which
// validate what they are given (an error wrapping ErrInvalid, nothing
// written). The JSON printed has the HTTP API's names (GET /v1/workflows).

func newWorkflowsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "workflows", Short: "Workflows: job runs that depend on job runs (create, list, show, wait, cancel, retry)"}
	cmd.AddCommand(newWorkflowsListCmd(), newWorkflowsShowCmd(), newWorkflowsCreateCmd(false), newWorkflowsCreateCmd(true),
		newWorkflowsActCmd("cancel"), newWorkflowsActCmd("retry"))
	return cmd
}

// workflowJSON is a workflow as --json prints it (the API's names).
type workflowJSON struct {
	ID                int64             `json:"id"`
	Shard             string            `json:"shard,omitempty"`
	Name              string            `json:"name"`
	State             string            `json:"state"`
	Tasks             int               `json:"tasks"`
	Done              int               `json:"done"`
	Failed            int               `json:"failed"`
	Cancelled         int               `json:"cancelled"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	CancelRequestedAt *time.Time        `json:"cancel_requested_at,omitempty"`
	CreatedAt         time.Time         `json:"created_at"`
	FinishedAt        *time.Time        `json:"finished_at,omitempty"`
}

type workflowTaskJSON struct {
	Name                string          `json:"name"`
	JobID               int64           `json:"job_id"`
	Kind                string          `json:"kind"`
	Queue               string          `json:"queue"`
	State               string          `json:"state"`
	Attempts            int             `json:"attempts"`
	MaxAttempts         int             `json:"max_attempts"`
	LastError           string          `json:"last_error,omitempty"`
	Output              json.RawMessage `json:"output,omitempty"`
	DependsOn           []string        `json:"depends_on"`
	DependsOnAnyOutcome []string        `json:"depends_on_any_outcome"`
	DepsLeft            int             `json:"deps_left"`
	CreatedAt           time.Time       `json:"created_at"`
	RunAt               time.Time       `json:"run_at"`
	FinishedAt          *time.Time      `json:"finished_at,omitempty"`
}

// workflowShowJSON is `workflows show --json`.
type workflowShowJSON struct {
	Workflow workflowJSON       `json:"workflow"`
	Tasks    []workflowTaskJSON `json:"tasks"`
	TimedOut bool               `json:"timed_out,omitempty"`
}

// shardShown is a workflow's shard as the commands show it: none on a
// Client of one database.
func shardShown(c *workq.Client, shard string) string {
	if len(c.Shards()) <= 1 {
		return ""
	}
	return shard
}

func workflowJSONOf(c *workq.Client, i workq.WorkflowInfo) workflowJSON {
	return workflowJSON{ID: i.Ref.ID, Shard: shardShown(c, i.Ref.Shard), Name: i.Name, State: string(i.State), Tasks: i.Tasks, Done: i.Done,
		Failed: i.Failed, Cancelled: i.Cancelled, Metadata: i.Metadata, CancelRequestedAt: i.CancelRequestedAt,
		CreatedAt: i.CreatedAt, FinishedAt: i.FinishedAt}
}

func workflowTaskJSONOf(t workq.WorkflowTask) workflowTaskJSON {
	r := workflowTaskJSON{Name: t.Name, JobID: t.JobID, Kind: t.Kind, Queue: t.Queue, State: string(t.State), Attempts: t.Attempts,
		MaxAttempts: t.MaxAttempts, LastError: t.LastError, Output: t.Output, DependsOn: t.DependsOn,
		DependsOnAnyOutcome: t.DependsOnAnyOutcome, DepsLeft: t.DepsLeft, CreatedAt: t.CreatedAt, RunAt: t.RunAt, FinishedAt: t.FinishedAt}
	if r.DependsOn == nil {
		r.DependsOn = []string{}
	}
	if r.DependsOnAnyOutcome == nil {
		r.DependsOnAnyOutcome = []string{}
	}
	return r
}

// shardSuffix is " on shard S" on a sharded Client, else "".
func shardSuffix(c *workq.Client, shard string) string {
	if sh := shardShown(c, shard); sh != "" {
		return " on shard " + sh
	}
	return ""
}

// parseWorkflowID reads a workflow id argument.
func parseWorkflowID(arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("%q is not a valid workflow id: an id is a positive whole number", arg)
	}
	return id, nil
}

func newWorkflowsListCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List workflows, newest first", Args: cobra.NoArgs}
	ff := bindFlowFlags(cmd, "lists each shard's newest, the shards in order")
	f := cmd.Flags()
	state := f.String("state", "", "only workflows in this state: running, completed, failed or cancelled")
	prefix := f.String("name-prefix", "", "only workflows whose name starts so")
	before := f.Int64("before", 0, "ids below this one (the next page)")
	limit := f.Int("limit", 0, fmt.Sprintf("at most this many (default %d, at most %d)", workq.DefaultListLimit, workq.MaxListLimit))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		p := workq.ListWorkflowsParams{State: workq.WorkflowState(*state), NamePrefix: *prefix, Before: *before, Limit: *limit}
		switch p.State {
		case "", workq.WorkflowRunning, workq.WorkflowCompleted, workq.WorkflowFailed, workq.WorkflowCancelled:
		default:
			return fmt.Errorf("--state %q: want running, completed, failed or cancelled", *state)
		}
		if cmd.Flags().Changed("limit") && *limit < 1 {
			return fmt.Errorf("--limit %d: want 1 to %d", *limit, workq.MaxListLimit)
		}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		is, err := client.ListWorkflows(cmd.Context(), p)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if *ff.asJSON {
			rows := make([]workflowJSON, len(is))
			for i, wi := range is {
				rows[i] = workflowJSONOf(client, wi)
			}
			return printJSON(out, map[string]any{"workflows": rows})
		}
		if len(is) == 0 {
			_, err := fmt.Fprintln(out, "no workflows")
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		sharded := len(client.Shards()) > 1
		row := func(id, shard string, rest ...string) {
			cols := []string{id}
			if sharded {
				cols = append(cols, shard)
			}
			fmt.Fprintln(tw, strings.Join(append(cols, rest...), "\t"))
		}
		row("ID", "SHARD", "NAME", "STATE", "TASKS", "DONE", "FAILED", "CANCELLED", "CREATED")
		for _, wi := range is {
			row(strconv.FormatInt(wi.Ref.ID, 10), wi.Ref.Shard, wi.Name, string(wi.State), strconv.Itoa(wi.Tasks), strconv.Itoa(wi.Done),
				strconv.Itoa(wi.Failed), strconv.Itoa(wi.Cancelled), wi.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return cmd
}

func newWorkflowsShowCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "show ID", Short: "Show a workflow and its tasks (state, dependencies, attempts, last error)", Args: cobra.ExactArgs(1)}
	ff := bindFlowFlags(cmd, "looks the workflow up on every shard given")
	wait := cmd.Flags().Duration("wait", 0, "first wait until the workflow has ended, at most this long (then show it as it is)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseWorkflowID(args[0])
		if err != nil {
			return err
		}
		if *wait < 0 {
			return fmt.Errorf("--wait %s: must not be negative", *wait)
		}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		ref := workq.WorkflowRef{ID: id}
		timedOut := false
		if *wait > 0 {
			ctx, cancel := context.WithTimeout(cmd.Context(), *wait)
			_, err := client.WaitWorkflow(ctx, ref)
			cancel()
			if err != nil && (!errors.Is(err, context.DeadlineExceeded) || cmd.Context().Err() != nil) {
				return err
			}
			timedOut = err != nil
		}
		info, err := client.GetWorkflow(cmd.Context(), ref)
		if err != nil {
			return err
		}
		tasks, err := client.WorkflowTasks(cmd.Context(), info.Ref)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if *ff.asJSON {
			v := workflowShowJSON{Workflow: workflowJSONOf(client, info), Tasks: make([]workflowTaskJSON, len(tasks)), TimedOut: timedOut}
			for i, t := range tasks {
				v.Tasks[i] = workflowTaskJSONOf(t)
			}
			return printJSON(out, v)
		}
		return printWorkflow(out, shardSuffix(client, info.Ref.Shard), info, tasks, timedOut)
	}
	return cmd
}

// printWorkflow prints a workflow and its tasks as a table.
func printWorkflow(out io.Writer, shard string, info workq.WorkflowInfo, tasks []workq.WorkflowTask, timedOut bool) error {
	fmt.Fprintf(out, "workflow %d%s %q: %s (%d tasks: %d done, %d failed, %d cancelled)\n", info.Ref.ID, shard, info.Name, info.State,
		info.Tasks, info.Done, info.Failed, info.Cancelled)
	if timedOut {
		fmt.Fprintln(out, "(the wait ran out before it ended)")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tJOB\tSTATE\tKIND\tDEPENDS ON\tATTEMPTS\tLAST ERROR")
	for _, t := range tasks {
		deps := append([]string(nil), t.DependsOn...)
		for _, d := range t.DependsOnAnyOutcome {
			deps = append(deps, d+" (any outcome)")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\n", t.Name, t.JobID, t.State, t.Kind, dash(strings.Join(deps, ", ")),
			t.Attempts, t.MaxAttempts, dash(oneLine(t.LastError, 80)))
	}
	return tw.Flush()
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// workflowSpec is the file of `workflows create` (POST /v1/workflows's
// body) and of `workflows add` (its tasks).
type workflowSpec struct {
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata"`
	Tasks    []taskSpec        `json:"tasks"`
}

type taskSpec struct {
	Name                string            `json:"name"`
	Kind                string            `json:"kind"`
	Args                json.RawMessage   `json:"args"`
	Queue               string            `json:"queue"`
	Priority            int16             `json:"priority"`
	MaxAttempts         int               `json:"max_attempts"`
	Delay               string            `json:"delay"`
	Metadata            map[string]string `json:"metadata"`
	LimitKey            string            `json:"limit_key"`
	DependsOn           []string          `json:"depends_on"`
	DependsOnAnyOutcome []string          `json:"depends_on_any_outcome"`
}

// readSpec reads a spec file ("-": standard input) strictly: no unknown
// member, nothing after the object.
func readSpec(cmd *cobra.Command, path string, add bool) (workflowSpec, error) {
	var sp workflowSpec
	if path == "" {
		return sp, fmt.Errorf("--file is required (a JSON workflow spec, - for standard input)")
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return sp, fmt.Errorf("--file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return sp, fmt.Errorf("--file %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return sp, fmt.Errorf("--file %s: data after the JSON object", path)
	}
	if add && (sp.Name != "" || sp.Metadata != nil) {
		return sp, fmt.Errorf("--file %s: tasks added to a workflow take only \"tasks\" (no name or metadata)", path)
	}
	return sp, nil
}

// addSpecTasks adds the spec's tasks to w (Enqueue reports their mistakes).
func addSpecTasks(w *workq.Workflow, sp workflowSpec) error {
	for i, t := range sp.Tasks {
		var delay time.Duration
		if t.Delay != "" {
			d, err := time.ParseDuration(t.Delay)
			if err != nil || d < 0 {
				return fmt.Errorf("tasks[%d].delay %q: want a duration such as 30s or 1h", i, t.Delay)
			}
			delay = d
		}
		var payload any
		if len(t.Args) > 0 {
			payload = t.Args
		}
		w.Add(t.Name, workq.RawArgs{KindName: t.Kind, Payload: payload}, &workq.TaskOpts{
			Enqueue: &workq.EnqueueOpts{Queue: t.Queue, Priority: t.Priority, MaxAttempts: t.MaxAttempts, Delay: delay,
				Metadata: t.Metadata, LimitKey: t.LimitKey},
			DependsOn: t.DependsOn, DependsOnAnyOutcome: t.DependsOnAnyOutcome})
	}
	return nil
}

// newWorkflowsCreateCmd is `workflows create` or, add, `workflows add ID`.
func newWorkflowsCreateCmd(add bool) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Create a workflow from a JSON spec (the body of POST /v1/workflows)", Args: cobra.NoArgs}
	if add {
		cmd = &cobra.Command{Use: "add ID", Short: "Add tasks to a running workflow from a JSON spec ({\"tasks\": [...]})", Args: cobra.ExactArgs(1)}
	}
	ff := bindFlowFlags(cmd, "writes a new workflow on one of them")
	file := cmd.Flags().String("file", "", "the JSON spec: {\"name\", \"metadata\", \"tasks\": [{\"name\", \"kind\", \"args\", \"depends_on\", ...}]} (- for standard input); required")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var id int64
		if add {
			var err error
			if id, err = parseWorkflowID(args[0]); err != nil {
				return err
			}
		}
		sp, err := readSpec(cmd, *file, add)
		if err != nil {
			return err
		}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		w := client.NewWorkflow(sp.Name, &workq.WorkflowOpts{Metadata: sp.Metadata})
		if add {
			w = client.AddToWorkflow(workq.WorkflowRef{ID: id})
		}
		if err := addSpecTasks(w, sp); err != nil {
			return err
		}
		res, err := w.Enqueue(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if *ff.asJSON {
			v := map[string]any{"id": res.Workflow.ID, "tasks": res.Tasks}
			if sh := shardShown(client, res.Workflow.Shard); sh != "" {
				v["shard"] = sh
			}
			return printJSON(out, v)
		}
		fmt.Fprintf(out, "workflow %d%s: %d tasks\n", res.Workflow.ID, shardSuffix(client, res.Workflow.Shard), len(res.Tasks))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tJOB")
		for _, t := range sp.Tasks {
			fmt.Fprintf(tw, "%s\t%d\n", t.Name, res.Tasks[t.Name])
		}
		return tw.Flush()
	}
	return cmd
}

// newWorkflowsActCmd is `workflows cancel ID` or `workflows retry ID`.
func newWorkflowsActCmd(verb string) *cobra.Command {
	short := "Cancel a running workflow: its pending and ready tasks at once, its running tasks asked to stop"
	if verb == "retry" {
		short = "Run a workflow's failed tasks again (and those cancelled other than by a failed dependency), lifting a cancel"
	}
	cmd := &cobra.Command{Use: verb + " ID", Short: short, Args: cobra.ExactArgs(1)}
	ff := bindFlowFlags(cmd, "looks the workflow up on every shard given")
	actor := cmd.Flags().String("actor", defaultActor(), "who acts (kept with the tasks' history)")
	reason := cmd.Flags().String("reason", "", "why")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseWorkflowID(args[0])
		if err != nil {
			return err
		}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		ref, by := workq.WorkflowRef{ID: id}, &workq.ActionOpts{Actor: *actor, Reason: *reason}
		out := cmd.OutOrStdout()
		if verb == "cancel" {
			res, err := client.CancelWorkflow(cmd.Context(), ref, by)
			if err != nil {
				return err
			}
			if *ff.asJSON {
				return printJSON(out, map[string]any{"id": id, "cancelled": res.Cancelled, "requested": res.Requested})
			}
			_, err = fmt.Fprintf(out, "workflow %d: %d tasks cancelled, %d running tasks asked to stop\n", id, res.Cancelled, res.Requested)
			return err
		}
		n, err := client.RetryWorkflow(cmd.Context(), ref, by)
		if err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(out, map[string]any{"id": id, "revived": n})
		}
		_, err = fmt.Fprintf(out, "workflow %d: %d tasks run again\n", id, n)
		return err
	}
	return cmd
}
