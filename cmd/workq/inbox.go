package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/inboxrt"
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
		flt    inboxrt.Filter
		status string
		asJSON bool
	)
	f := cmd.Flags()
	f.StringVar(&flt.Queue, "queue", "", "only this queue")
	f.StringVar(&status, "status", "", "only this status: ready, processing, processed (done) or dead (failed)")
	f.StringVar(&flt.Source, "source", "", "only this source")
	f.StringVar(&flt.Topic, "topic", "", "only this topic")
	f.Int64Var(&flt.AfterID, "after-id", 0, "only ids above this (the last id of the previous page)")
	f.IntVar(&flt.Limit, "limit", 100, "most messages to list (1-10000)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if status != "" {
			st, err := inboxrt.ParseStatus(status)
			if err != nil {
				return fmt.Errorf("--status: %w", err)
			}
			flt.Status = &st
		}
		if flt.Limit < 1 || flt.Limit > 10000 {
			return fmt.Errorf("--limit must be between 1 and 10000, got %d", flt.Limit)
		}
		if flt.AfterID < 0 {
			return fmt.Errorf("--after-id must not be negative, got %d", flt.AfterID)
		}
		ctx := cmd.Context()
		pool, done, err := connectDB(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		rows, err := inboxrt.List(ctx, pool, flt)
		if err != nil {
			return err
		}
		if asJSON {
			out := make([]storedJSON, len(rows))
			for i, r := range rows {
				out[i] = toStoredJSON(r)
			}
			return printJSON(cmd.OutOrStdout(), out)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tQUEUE\tSOURCE\tMESSAGE ID\tTOPIC\tSTATUS\tATTEMPTS\tRECEIVED")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", r.ID, r.Queue, r.Source, r.MessageID, dash(r.Topic),
				inboxrt.StatusName(r.Status), r.Attempts, r.MaxAttempts, r.ReceivedAt.UTC().Format(time.RFC3339))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rows) == flt.Limit {
			fmt.Fprintf(cmd.OutOrStdout(), "more may follow: --after-id %d\n", rows[len(rows)-1].ID)
		}
		return nil
	}
	return cmd
}

// storedJSON is an inbox message as list and show print it.
type storedJSON struct {
	inboxrt.Stored
	Status  string `json:"status"`
	Payload any    `json:"payload,omitempty"`
}

func toStoredJSON(s inboxrt.Stored) storedJSON {
	out := storedJSON{Stored: s, Status: inboxrt.StatusName(s.Status)}
	if s.Payload != nil {
		out.Payload = rawJSON(s.Payload)
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
		client, pool, done, err := opsClientDB(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		msg, err := inboxrt.Get(ctx, pool, id)
		if err != nil {
			return err
		}
		ref := workq.ItemRef{Table: workq.TableInbox, ID: id}
		atts, err := client.Attempts(ctx, ref)
		if err != nil {
			return err
		}
		if atts == nil {
			atts = []workqtype.Attempt{}
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"message": toStoredJSON(msg), "attempts": atts})
		}
		// The generic item view's last error: none once processed.
		it, err := client.Get(ctx, ref)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "id:           %d\nqueue:        %s\nsource:       %s\nmessage id:   %s\ntopic:        %s\n",
			msg.ID, msg.Queue, msg.Source, msg.MessageID, dash(msg.Topic))
		when, at := whenLine(it)
		fmt.Fprintf(w, "status:       %s\nattempts:     %d of %d\nreceived at:  %s\n%-14s%s\n",
			inboxrt.StatusName(msg.Status), msg.Attempts, msg.MaxAttempts, msg.ReceivedAt.UTC().Format(time.RFC3339Nano), when+":", at.UTC().Format(time.RFC3339Nano))
		if it.LastError != "" {
			fmt.Fprintf(w, "last error:   %s\n", it.LastError)
		}
		fmt.Fprintf(w, "payload hash: %x\npayload:      %s\n", msg.PayloadHash, msg.Payload)
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
