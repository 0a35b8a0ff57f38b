package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

func newTimersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "timers schedule|cancel|list|show",
		Short: "Schedule, cancel, list and show durable timers",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTimersScheduleCmd(), newTimersCancelCmd())
	cmd.AddCommand(itemCommands(workq.TableTimers)...)
	return cmd
}

func newTimersScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule --topic T (--at TIME | --in DURATION) [--queue Q] [--payload JSON|@FILE|-] [--max-attempts N] [--json]",
		Short: "Schedule one timer and print its id",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-attempts", "max-payload", "notify-debounce")
	var (
		timer   timers.Timer
		payload string
		at      string
		in      time.Duration
		asJSON  bool
	)
	f := cmd.Flags()
	f.StringVar(&timer.Topic, "topic", "", "topic (selects the handler); required")
	f.StringVar(&timer.Queue, "queue", "default", "queue name")
	f.StringVar(&payload, "payload", "{}", "JSON object; @FILE reads it from a file, - from standard input")
	f.StringVar(&at, "at", "", "due at this RFC 3339 time (a time in the past is due now)")
	f.DurationVar(&in, "in", 0, "due after this duration from now on the database clock (e.g. 90s, 2h)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if timer.Topic == "" {
			return fmt.Errorf("--topic is required")
		}
		if timer.Queue == "" {
			return fmt.Errorf("--queue must not be empty: a queue name is 1-128 of A-Z a-z 0-9 _ . : - (omit --queue for %q)", "default")
		}
		switch {
		case f.Changed("at") && f.Changed("in"):
			return fmt.Errorf("give --at or --in, not both")
		case f.Changed("at"):
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				return fmt.Errorf("--at %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", at)
			}
			if t.IsZero() {
				return fmt.Errorf("--at %q is the zero time; give a real time, or a past one for a timer due now", at)
			}
			timer.DueTime = t
		case f.Changed("in"):
			if in <= 0 {
				return fmt.Errorf("--in must be positive, got %s (for a timer due now, --at with the current time)", in)
			}
			timer.Delay = in
		default:
			return fmt.Errorf("give --at TIME or --in DURATION: when the timer is due")
		}
		raw, err := attemptsAndPayload(cmd, cfg, payload)
		if err != nil {
			return err
		}
		timer.Payload = json.RawMessage(raw)
		timer.MaxAttempts = cfg.MaxAttempts
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		res, err := client.ScheduleTimer(ctx, timer)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"id": res.ID, "due_time": res.DueTime, "due_now": res.DueNow})
		}
		fmt.Fprintln(cmd.OutOrStdout(), res.ID)
		return nil
	}
	return cmd
}

func parseTimerID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("timer id must be a positive whole number, got %q", s)
	}
	return id, nil
}

func newTimersCancelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel ID [--running] [--json]",
		Short: "Cancel a timer that no worker has claimed yet (--running: or one that runs)",
		Long: "Cancel a timer that no worker has claimed yet. Cancelling a cancelled timer succeeds again.\n" +
			"Exits non-zero, saying why, when the timer is claimed (in progress), finished (done, failed or cancelled) or unknown.\n" +
			"With --running a claimed timer's cancel is requested instead: the worker running it cancels its handler,\n" +
			"and the timer ends cancelled when the handler returns (recorded in the run archive with --actor).",
		Args: cobra.ExactArgs(1),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	running := cmd.Flags().Bool("running", false, "also cancel a running timer (its worker stops the handler)")
	actor := cmd.Flags().String("actor", defaultActor(), "who (recorded in the run archive; with --running)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseTimerID(args[0])
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		err = client.CancelTimer(ctx, id)
		if errors.Is(err, timers.ErrClaimed) && *running {
			if strings.TrimSpace(*actor) == "" {
				return fmt.Errorf("--actor must not be empty")
			}
			r, err := client.Cancel(ctx, workq.ItemRef{Table: workq.TableTimers, ID: id}, &workq.ActionOpts{Actor: *actor})
			switch {
			case errors.Is(err, workq.ErrWrongState):
				return fmt.Errorf("timer %d: finished meanwhile", id)
			case err != nil:
				return err
			case r == workq.CancelledNow: // back to ready meanwhile: cancelled at once
				if *asJSON {
					return printJSON(cmd.OutOrStdout(), map[string]any{"id": id, "state": workq.StateCancelled})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "timer %d cancelled\n", id)
				return nil
			}
			if *asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": id, "state": workq.StateInProgress, "cancel_requested": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "timer %d: cancel requested (running: its worker stops it)\n", id)
			return nil
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"id": id, "state": workq.StateCancelled})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "timer %d cancelled\n", id)
		return nil
	}
	return cmd
}

func newTimersListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--queue Q] [--topic T] [--state S] [--due-before TIME] [--due-after TIME] [--after-id ID] [--limit N] [--json]",
		Short: "List timers in id order (keyset pagination with --after-id)",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	var (
		p                   = workq.ListParams{Table: workq.TableTimers}
		state               string
		afterID             int64
		limit               int
		dueBefore, dueAfter string
		asJSON              bool
	)
	f := cmd.Flags()
	f.StringVar(&p.Queue, "queue", "", "only this queue")
	f.StringVar(&p.Kind, "topic", "", "only this topic")
	f.StringVar(&state, "state", "", "only this state: "+strings.Join(timerKind.States, ", "))
	f.StringVar(&dueBefore, "due-before", "", "only timers due before this RFC 3339 time")
	f.StringVar(&dueAfter, "due-after", "", "only timers due at or after this RFC 3339 time")
	f.Int64Var(&afterID, "after-id", 0, "only ids greater than this (the last id of the previous page)")
	f.IntVar(&limit, "limit", 100, fmt.Sprintf("at most this many (1-%d)", maxTimersList))
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		for _, d := range []struct {
			name, val string
			to        *time.Time
		}{{"--due-before", dueBefore, &p.DueBefore}, {"--due-after", dueAfter, &p.DueAfter}} {
			if d.val == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, d.val)
			if err != nil {
				return fmt.Errorf("%s %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", d.name, d.val)
			}
			*d.to = t
		}
		if limit < 1 || limit > maxTimersList {
			return fmt.Errorf("--limit must be between 1 and %d, got %d", maxTimersList, limit)
		}
		if afterID < 0 {
			return fmt.Errorf("--after-id must not be negative, got %d", afterID)
		}
		if f.Changed("state") && state == "" || state != "" && !slices.Contains(timerKind.States, state) {
			return fmt.Errorf("--state %q is not one of %s", state, strings.Join(timerKind.States, ", "))
		}
		if state != "" {
			p.States = []string{state}
		}
		if f.Changed("queue") && !workqtype.ValidName(p.Queue) {
			return fmt.Errorf("--queue %q is not a valid name (1-128 of A-Z a-z 0-9 _ . : -)", p.Queue)
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		items, err := listAfter(ctx, client, p, afterID, limit)
		if err != nil {
			return err
		}
		list := make([]timerInfo, len(items))
		for i, it := range items {
			list[i] = timerInfoOf(it)
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), list)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tQUEUE\tTOPIC\tSTATE\tDUE\tATTEMPTS\tLAST ERROR")
		for _, t := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Queue, t.Topic, t.State,
				t.DueTime.UTC().Format(time.RFC3339Nano), t.Attempts, t.MaxAttempts, shortText(t.LastError))
		}
		return tw.Flush()
	}
	return cmd
}

// maxTimersList is the most timers one `timers list` prints.
const maxTimersList = 10000

// timerKind is the timers' entry of the registry of kinds (its state
// words).
var timerKind, _ = kinds.Of(workq.TableTimers)

// timerInfo is a timer as `timers list|show --json` have always printed
// it (the names of the timers' own record).
type timerInfo struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Topic       string          `json:"topic"`
	Payload     json.RawMessage `json:"payload"`
	DueTime     time.Time       `json:"due_time"`
	State       string          `json:"state"`
	Status      int16           `json:"status"` // the status column's number
	Priority    int16           `json:"priority"`
	RunAt       time.Time       `json:"run_at"` // when it may next be claimed: the due time, or later after a retry
	Attempts    int32           `json:"attempts"`
	MaxAttempts int32           `json:"max_attempts"`
	LastError   string          `json:"last_error,omitempty"`
	ClaimedAt   *time.Time      `json:"claimed_at,omitempty"`
	ClaimedBy   string          `json:"claimed_by,omitempty"`
	LockedUntil *time.Time      `json:"locked_until,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	CancelledAt *time.Time      `json:"cancelled_at,omitempty"`
}

// timerInfoOf is the record of the Client's item (its own columns are in
// Item.Details).
func timerInfoOf(it workq.Item) timerInfo {
	out := timerInfo{ID: it.ID, Queue: it.Queue, Topic: it.Kind, Payload: it.Payload, State: it.State, Status: statusNumber(it),
		Priority: it.Priority, RunAt: it.RunAt, Attempts: it.Attempts, MaxAttempts: it.MaxAttempts, LastError: it.LastError,
		ClaimedAt: it.ClaimedAt, ClaimedBy: it.ClaimedBy, LockedUntil: it.LockedUntil, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		FinishedAt: it.FinishedAt, CancelledAt: detailTime(it, "cancelled_at")}
	if t := detailTime(it, "due_time"); t != nil {
		out.DueTime = *t
	}
	return out
}

func shortText(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

func newTimersShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one timer and its attempts from the run archive",
		Args:  cobra.ExactArgs(1),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseTimerID(args[0])
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		ref := workq.ItemRef{Table: workq.TableTimers, ID: id}
		it, err := client.Get(ctx, ref)
		if errors.Is(err, workq.ErrNotFound) {
			return fmt.Errorf("timer %d: %w", id, timers.ErrNotFound)
		}
		if err != nil {
			return err
		}
		info := timerInfoOf(it)
		attempts, err := client.Attempts(ctx, ref)
		if err != nil {
			return err
		}
		if attempts == nil {
			attempts = []workqtype.Attempt{}
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), struct {
				timerInfo
				History []workqtype.Attempt `json:"history"`
			}{info, attempts})
		}
		// The generic item view says when it ran and its last error
		// (none once fired: an earlier attempt's is not the timer's).
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "id:           %d\nqueue:        %s\ntopic:        %s\nstate:        %s\n", info.ID, info.Queue, info.Topic, info.State)
		when, at := whenLine(it)
		if it.FinishedAt == nil {
			when = "next run at"
		}
		fmt.Fprintf(w, "due:          %s\n%-14s%s\nattempts:     %d of %d\n", info.DueTime.UTC().Format(time.RFC3339Nano),
			when+":", at.UTC().Format(time.RFC3339Nano), info.Attempts, info.MaxAttempts)
		if it.LastError != "" {
			fmt.Fprintf(w, "last error:   %s\n", it.LastError)
		}
		if info.ClaimedAt != nil && info.State == workq.StateInProgress {
			fmt.Fprintf(w, "claimed:      %s by %s\n", info.ClaimedAt.UTC().Format(time.RFC3339Nano), info.ClaimedBy)
		}
		if info.CancelledAt != nil && info.State == workq.StateCancelled {
			fmt.Fprintf(w, "cancelled:    %s\n", info.CancelledAt.UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintf(w, "payload:      %s\n", info.Payload)
		if len(attempts) > 0 {
			fmt.Fprintln(w, "history:")
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  ATTEMPT\tOUTCOME\tWORKER\tSTARTED\tFINISHED\tERROR")
			for _, a := range attempts {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Outcome, a.Worker,
					a.StartedAt.UTC().Format(time.RFC3339Nano), a.FinishedAt.UTC().Format(time.RFC3339Nano), shortText(a.Error))
			}
			return tw.Flush()
		}
		return nil
	}
	return cmd
}
