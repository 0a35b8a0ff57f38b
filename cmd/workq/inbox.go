package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/workqtype"
)

func newInboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inbox receive|list|show|revive",
		Short: "Receive messages idempotently and inspect or revive inbox messages",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newInboxReceiveCmd())
	cmd.AddCommand(itemCommands(workq.TableInbox)...)
	return cmd
}

// inboxResult is what receive prints.
type inboxResult struct {
	ID        int64  `json:"id"`
	Result    string `json:"result"` // new, duplicate or conflict
	Processed bool   `json:"processed"`
	Status    string `json:"status"`
}

func newInboxReceiveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receive --source S --message-id ID [--topic T] [--queue Q] [--payload JSON|@FILE|-] [--priority N] [--max-attempts N] [--json]",
		Short: "Receive one message: prints new, duplicate or conflict and the message's id; a conflict exits non-zero",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-attempts", "max-payload", "notify-debounce")
	var (
		msg     inbox.Message
		payload string
		asJSON  bool
	)
	f := cmd.Flags()
	f.StringVar(&msg.Source, "source", "", "the sending system; required")
	f.StringVar(&msg.MessageID, "message-id", "", "the sender's id of the message; required")
	f.StringVar(&msg.Topic, "topic", "", "selects the handler (none: the default handler)")
	f.StringVar(&msg.Queue, "queue", "default", "queue name")
	f.StringVar(&payload, "payload", "{}", "JSON object; @FILE reads it from a file, - from standard input")
	f.Int16Var(&msg.Priority, "priority", 0, "stored priority (-32768..32767; the inbox claims in arrival order)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if msg.Source == "" || msg.MessageID == "" {
			return fmt.Errorf("--source and --message-id are required")
		}
		if msg.Queue == "" {
			return fmt.Errorf("--queue must not be empty: a queue name is 1-128 of A-Z a-z 0-9 _ . : - (omit --queue for %q)", "default")
		}
		raw, err := attemptsAndPayload(cmd, cfg, payload)
		if err != nil {
			return err
		}
		msg.Payload = json.RawMessage(raw)
		msg.MaxAttempts = cfg.MaxAttempts
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		res, err := client.Receive(ctx, msg)
		if err != nil && !res.Conflict {
			return err
		}
		out := inboxResult{ID: res.ID, Result: "new", Processed: res.Processed, Status: res.Status}
		switch {
		case res.Conflict:
			out.Result = "conflict"
		case res.Duplicate:
			out.Result = "duplicate"
		}
		if asJSON {
			if perr := printJSON(cmd.OutOrStdout(), out); perr != nil {
				return perr
			}
		} else {
			line := fmt.Sprintf("%s %d", out.Result, out.ID)
			if res.Duplicate {
				line += " (" + out.Status + ")"
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
		}
		return err // the conflict: a non-zero exit
	}
	return cmd
}

func newInboxListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--queue Q] [--status ready|processing|processed|dead] [--source S] [--topic T] [--after-id N] [--limit N] [--json]",
		Short: "List inbox messages in id order (keyset pages: pass the last id as --after-id)",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	var (
		p       = workq.ListParams{Table: workq.TableInbox}
		status  string
		afterID int64
		limit   int
		asJSON  bool
	)
	f := cmd.Flags()
	f.StringVar(&p.Queue, "queue", "", "only this queue")
	f.StringVar(&status, "status", "", "only this status: ready, processing, processed (done) or dead (failed)")
	f.StringVar(&p.Source, "source", "", "only this source")
	f.StringVar(&p.Kind, "topic", "", "only this topic")
	f.Int64Var(&afterID, "after-id", 0, "only ids above this (the last id of the previous page)")
	f.IntVar(&limit, "limit", 100, "most messages to list (1-10000)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if status != "" {
			if _, ok := inboxKind.ParseState(status); !ok {
				return fmt.Errorf("--status: %w: status %q is not one of ready, processing, processed, dead, cancelled", workqtype.ErrInvalid, status)
			}
			p.States = []string{status}
		}
		if limit < 1 || limit > 10000 {
			return fmt.Errorf("--limit must be between 1 and 10000, got %d", limit)
		}
		if afterID < 0 {
			return fmt.Errorf("--after-id must not be negative, got %d", afterID)
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		rows, err := listAfter(ctx, client, p, afterID, limit)
		if err != nil {
			return err
		}
		if asJSON {
			out := make([]storedJSON, len(rows))
			for i, r := range rows {
				out[i] = toStoredJSON(r)
				out[i].Payload = nil // a list leaves the payloads out
			}
			return printJSON(cmd.OutOrStdout(), out)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tQUEUE\tSOURCE\tMESSAGE ID\tTOPIC\tSTATUS\tATTEMPTS\tRECEIVED")
		for _, it := range rows {
			r := toStoredJSON(it)
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", r.ID, r.Queue, r.Source, r.MessageID, dash(r.Topic),
				r.Status, r.Attempts, r.MaxAttempts, r.ReceivedAt.UTC().Format(time.RFC3339))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rows) == limit {
			fmt.Fprintf(cmd.OutOrStdout(), "more may follow: --after-id %d\n", rows[len(rows)-1].ID)
		}
		return nil
	}
	return cmd
}

// inboxKind is the inbox's entry of the registry of kinds (its state
// words).
var inboxKind, _ = kinds.Of(workq.TableInbox)

// storedJSON is an inbox message as list and show print it (the names
// of the inbox's own record).
type storedJSON struct {
	ID          int64      `json:"id"`
	Queue       string     `json:"queue"`
	Source      string     `json:"source"`
	MessageID   string     `json:"message_id"`
	Topic       string     `json:"topic,omitempty"`
	Priority    int16      `json:"priority"`
	Attempts    int32      `json:"attempts"`
	MaxAttempts int32      `json:"max_attempts"`
	ReceivedAt  time.Time  `json:"received_at"`
	RunAt       time.Time  `json:"run_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	Status      string     `json:"status"` // the inbox's word (Item.State)
	Payload     any        `json:"payload,omitempty"`
}

// toStoredJSON is the record of the Client's item (its own columns are
// in Item.Details).
func toStoredJSON(it workq.Item) storedJSON {
	out := storedJSON{ID: it.ID, Queue: it.Queue, Source: detailOf[string](it, "source"), MessageID: detailOf[string](it, "message_id"),
		Topic: it.Kind, Priority: it.Priority, Attempts: it.Attempts, MaxAttempts: it.MaxAttempts,
		RunAt: it.RunAt, FinishedAt: it.FinishedAt, LastError: it.LastError, Status: it.State}
	if t := detailTime(it, "first_seen_at"); t != nil {
		out.ReceivedAt = *t
	}
	if it.Payload != nil {
		out.Payload = rawJSON(it.Payload)
	}
	return out
}

// rawJSON prints stored JSON text as it is.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newInboxShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one inbox message with its attempts from the run archive",
		Args:  cobra.ExactArgs(1),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id < 1 {
			return fmt.Errorf("ID must be a positive whole number, got %q", args[0])
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		ref := workq.ItemRef{Table: workq.TableInbox, ID: id}
		it, err := client.Get(ctx, ref)
		if errors.Is(err, workq.ErrNotFound) {
			return fmt.Errorf("inbox %d: %w", id, inbox.ErrNotFound)
		}
		if err != nil {
			return err
		}
		msg := toStoredJSON(it)
		atts, err := client.Attempts(ctx, ref)
		if err != nil {
			return err
		}
		if atts == nil {
			atts = []workqtype.Attempt{}
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"message": msg, "attempts": atts})
		}
		// The generic item view's last error: none once processed.
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "id:           %d\nqueue:        %s\nsource:       %s\nmessage id:   %s\ntopic:        %s\n",
			msg.ID, msg.Queue, msg.Source, msg.MessageID, dash(msg.Topic))
		when, at := whenLine(it)
		fmt.Fprintf(w, "status:       %s\nattempts:     %d of %d\nreceived at:  %s\n%-14s%s\n",
			msg.Status, msg.Attempts, msg.MaxAttempts, msg.ReceivedAt.UTC().Format(time.RFC3339Nano), when+":", at.UTC().Format(time.RFC3339Nano))
		if it.LastError != "" {
			fmt.Fprintf(w, "last error:   %s\n", it.LastError)
		}
		fmt.Fprintf(w, "payload hash: %s\npayload:      %s\n", detailOf[string](it, "payload_hash"), it.Payload)
		if len(atts) == 0 {
			fmt.Fprintln(w, "attempts:     none archived yet")
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nATTEMPT\tOUTCOME\tWORKER\tFINISHED\tRUN ID\tERROR")
		for _, a := range atts {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Outcome, a.Worker, a.FinishedAt.UTC().Format(time.RFC3339Nano), a.RunID, dash(a.Error))
		}
		return tw.Flush()
	}
	return cmd
}

// defaultActor names the operator for audit rows: cli:$USER.
func defaultActor() string {
	if u := os.Getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}
