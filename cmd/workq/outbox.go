package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

func newOutboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox send|list|show|retry|blocked",
		Short: "Write, inspect and retry outbox messages",
	}
	cmd.AddCommand(newOutboxSendCmd(), newOutboxBlockedCmd())
	cmd.AddCommand(itemCommands(workq.TableOutbox)...)
	return cmd
}

func newOutboxSendCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "send --topic T [--queue Q] [--payload JSON|@FILE|-] [--key K] [--header N=V]... [--message-id UUID] [--correlation-id C] [--priority N] [--delay D | --run-at T] [--max-attempts N] [--json]",
		Short: "Write one outbox message and print its id",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-attempts", "max-payload", "notify-debounce")
	var (
		m                  outbox.Message
		payload, runAt, id string
		headers            []string
		asJSON             bool
	)
	f := cmd.Flags()
	f.StringVar(&m.Queue, "queue", "default", "queue name")
	f.StringVar(&m.Topic, "topic", "", "topic (selects the relay's handler); required")
	f.StringVar(&payload, "payload", "{}", "JSON object; @FILE reads it from a file, - from standard input")
	f.StringVar(&m.PartitionKey, "key", "", "partition key: messages with the same key are delivered in write order, one at a time")
	f.StringArrayVar(&headers, "header", nil, "header NAME=VALUE (repeatable)")
	f.StringVar(&id, "message-id", "", "message id (a UUID; default: a random one)")
	f.StringVar(&m.CorrelationID, "correlation-id", "", "correlation id")
	f.Int16Var(&m.Priority, "priority", 0, "higher first among unkeyed messages (-32768..32767)")
	f.DurationVar(&m.Delay, "delay", 0, "deliver no earlier than now + delay (e.g. 30s)")
	f.StringVar(&runAt, "run-at", "", "deliver no earlier than this RFC 3339 time")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if m.Topic == "" {
			return fmt.Errorf("--topic is required")
		}
		if m.Queue == "" {
			return fmt.Errorf("--queue must not be empty: a queue name is 1-128 of A-Z a-z 0-9 _ . : - (omit --queue for %q)", "default")
		}
		if f.Changed("key") && m.PartitionKey == "" {
			return fmt.Errorf("--key must not be empty (omit it for an unordered message)")
		}
		if f.Changed("run-at") {
			t, err := time.Parse(time.RFC3339Nano, runAt)
			if err != nil || t.IsZero() {
				return fmt.Errorf("--run-at %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", runAt)
			}
			m.RunAt = t
		}
		if id != "" {
			u, err := uuid.Parse(id)
			if err != nil || u == uuid.Nil {
				return fmt.Errorf("--message-id %q is not a UUID", id)
			}
			m.MessageID = u
		}
		for _, h := range headers {
			name, value, ok := strings.Cut(h, "=")
			if !ok {
				return fmt.Errorf("--header %q: want NAME=VALUE", h)
			}
			if m.Headers == nil {
				m.Headers = map[string]string{}
			}
			if _, dup := m.Headers[name]; dup {
				return fmt.Errorf("--header %q: %q given twice", h, name)
			}
			m.Headers[name] = value
		}
		raw, err := attemptsAndPayload(cmd, cfg, payload)
		if err != nil {
			return err
		}
		m.Payload, m.MaxAttempts = json.RawMessage(raw), cfg.MaxAttempts
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		sent, err := client.Send(ctx, m)
		if err != nil {
			return err
		}
		sent.Shard = "" // one database: the CLI names no shard
		if asJSON {
			return printJSON(cmd.OutOrStdout(), sent)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%d %s\n", sent.ID, sent.MessageID)
		return nil
	}
	return cmd
}

// parseStatus checks an outbox list's --status: a lease state name.
func parseStatus(s string) (string, error) {
	if s == "" || slices.Contains(itemStates, s) {
		return s, nil
	}
	return "", fmt.Errorf("--status %q: want ready, in_progress, done, failed or cancelled", s)
}

// outboxRecord is an outbox message as `outbox list|show --json` have
// always printed it (the names of the outbox's own record).
type outboxRecord struct {
	ID            int64           `json:"id"`
	Queue         string          `json:"queue"`
	Topic         string          `json:"topic"`
	PartitionKey  string          `json:"partition_key,omitempty"`
	MessageID     uuid.UUID       `json:"message_id"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	Headers       json.RawMessage `json:"headers"`
	Status        string          `json:"status"`
	Priority      int16           `json:"priority"`
	RunAt         time.Time       `json:"run_at"`
	Attempts      int32           `json:"attempts"`
	MaxAttempts   int32           `json:"max_attempts"`
	LeaseVersion  int64           `json:"lease_version"`
	ClaimedBy     string          `json:"claimed_by,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	KeySeq        int64           `json:"key_seq,omitempty"` // the message's place in its partition key's order (0: no key, or delivered before migration 00016)
	JoinID        int64           `json:"join_id,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
}

// outboxRecordOf is the record of the Client's item (its own columns are
// in Item.Details).
func outboxRecordOf(it workq.Item) outboxRecord {
	headers := detailOf[json.RawMessage](it, "headers")
	if headers == nil {
		headers = json.RawMessage("{}") // the column's default: the item leaves it out
	}
	return outboxRecord{ID: it.ID, Queue: it.Queue, Topic: it.Kind, PartitionKey: detailOf[string](it, "partition_key"),
		MessageID: detailOf[uuid.UUID](it, "message_id"), CorrelationID: detailOf[string](it, "correlation_id"),
		Payload: it.Payload, Headers: headers, Status: it.Status, Priority: it.Priority, RunAt: it.RunAt, Attempts: it.Attempts,
		MaxAttempts: it.MaxAttempts, LeaseVersion: it.LeaseVersion, ClaimedBy: it.ClaimedBy, LastError: it.LastError,
		KeySeq: detailOf[int64](it, "key_seq"), JoinID: detailOf[int64](it, "join_id"),
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, FinishedAt: it.FinishedAt}
}

func newOutboxListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--queue Q] [--status S] [--topic T] [--key K] [--after-id N] [--limit N] [--json]",
		Short: "List outbox messages in id order (keyset pagination: --after-id the last id shown)",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	var (
		p       = workq.ListParams{Table: workq.TableOutbox}
		status  string
		afterID int64
		limit   int
		asJSON  bool
	)
	f := cmd.Flags()
	f.StringVar(&p.Queue, "queue", "", "only this queue")
	f.StringVar(&status, "status", "", "only this status: ready, in_progress, done, failed, cancelled")
	f.StringVar(&p.Kind, "topic", "", "only this topic")
	f.StringVar(&p.PartitionKey, "key", "", "only this partition key")
	f.Int64Var(&afterID, "after-id", 0, "only ids after this one (the last id of the previous page)")
	f.IntVar(&limit, "limit", 50, "at most this many (1-10000)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := parseStatus(status)
		if err != nil {
			return err
		}
		if st != "" {
			p.States = []string{st}
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
		items, err := listAfter(ctx, client, p, afterID, limit)
		if err != nil {
			return err
		}
		if asJSON {
			recs := make([]outboxRecord, len(items))
			for i, it := range items {
				recs[i] = outboxRecordOf(it)
			}
			return printJSON(cmd.OutOrStdout(), recs)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tQUEUE\tTOPIC\tKEY\tSTATUS\tATTEMPTS\tRUN/ENDED AT\tLAST ERROR")
		for _, it := range items {
			// The generic item view's (jobs list's): a finished message's
			// end, and no last error once done (an earlier attempt's).
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", it.ID, it.Queue, it.Kind, detailOf[string](it, "partition_key"), it.Status,
				it.Attempts, it.MaxAttempts, it.WhenAt().Format(time.RFC3339), clip(it.LastError, 60))
		}
		return tw.Flush()
	}
	return cmd
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// outboxRef parses a message reference: an id or a message id (a UUID).
func outboxRef(arg string) (int64, uuid.UUID, error) {
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil && id > 0 {
		return id, uuid.Nil, nil
	}
	if u, err := uuid.Parse(arg); err == nil {
		return 0, u, nil
	}
	return 0, uuid.Nil, fmt.Errorf("%q is neither an outbox id (a positive number) nor a message id (a UUID)", arg)
}

// getOutbox reads the message of an id, or of a message id (a list by
// ListParams.MessageID: the outbox has at most one).
func getOutbox(ctx context.Context, client *workq.Client, id int64, mid uuid.UUID) (workq.Item, error) {
	if id != 0 {
		it, err := client.Get(ctx, workq.ItemRef{Table: workq.TableOutbox, ID: id})
		if errors.Is(err, workq.ErrNotFound) {
			return it, fmt.Errorf("%w: id %d", outbox.ErrNotFound, id)
		}
		return it, err
	}
	res, err := client.List(ctx, workq.ListParams{Table: workq.TableOutbox, MessageID: mid, Limit: 1})
	if err != nil {
		return workq.Item{}, err
	}
	if len(res.Items) == 0 {
		return workq.Item{}, fmt.Errorf("%w: message id %s", outbox.ErrNotFound, mid)
	}
	return res.Items[0], nil
}

func newOutboxShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID|MESSAGE-ID [--json]",
		Short: "Show one outbox message and its attempts (from the run archive)",
		Args:  cobra.ExactArgs(1),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, mid, err := outboxRef(args[0])
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		it, err := getOutbox(ctx, client, id, mid)
		if err != nil {
			return err
		}
		r := outboxRecordOf(it)
		att, err := client.Attempts(ctx, workq.ItemRef{Table: workq.TableOutbox, ID: r.ID})
		if err != nil {
			return err
		}
		if *asJSON {
			if att == nil {
				att = []workqtype.Attempt{}
			}
			return printJSON(cmd.OutOrStdout(), map[string]any{"message": r, "attempts": att})
		}
		// The generic item view says when it ran and its last error
		// (none once done: an earlier attempt's is not the message's).
		when, at := whenLine(it)
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "id:             %d\nmessage id:     %s\nqueue:          %s\ntopic:          %s\n", r.ID, r.MessageID, r.Queue, r.Topic)
		if r.PartitionKey != "" {
			fmt.Fprintf(out, "partition key:  %s\n", r.PartitionKey)
		}
		if r.CorrelationID != "" {
			fmt.Fprintf(out, "correlation id: %s\n", r.CorrelationID)
		}
		fmt.Fprintf(out, "status:         %s (attempts %d of %d)\n%-16s%s\ncreated at:     %s\nheaders:        %s\npayload:        %s\n",
			r.Status, r.Attempts, r.MaxAttempts, when+":", at.Format(time.RFC3339Nano), r.CreatedAt.Format(time.RFC3339Nano), r.Headers, r.Payload)
		if it.LastError != "" {
			fmt.Fprintf(out, "last error:     %s\n", it.LastError)
		}
		fmt.Fprintf(out, "attempts:       %d archived\n", len(att))
		for _, a := range att {
			fmt.Fprintf(out, "  #%d %s by %s, %s .. %s %s\n", a.Attempt, a.Outcome, a.Worker,
				a.StartedAt.Format(time.RFC3339Nano), a.FinishedAt.Format(time.RFC3339Nano), clip(a.Error, 100))
		}
		return nil
	}
	return cmd
}

func newOutboxBlockedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "blocked [--queue Q] [--all] [--skip-topic T]... [--after-key K] [--limit N] [--json]",
		Short: "List partition keys held up by a failing or failed head message (--all: every key with pending messages)",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	var (
		q      workq.OutboxKeysParams
		all    bool
		asJSON bool
	)
	f := cmd.Flags()
	f.StringVar(&q.Queue, "queue", "default", "queue name")
	f.BoolVar(&all, "all", false, "every key with messages not done, not only blocked ones")
	f.StringArrayVar(&q.SkipTopics, "skip-topic", nil, "a topic whose relay uses OnFinalFailure Skip (its failed messages block nothing)")
	f.StringVar(&q.AfterKey, "after-key", "", "keys after this one (the last key of the previous page)")
	f.IntVar(&q.Limit, "limit", 100, "at most this many (1-10000)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !workqtype.ValidName(q.Queue) {
			return fmt.Errorf("--queue %q is not a valid name (1-128 of A-Z a-z 0-9 _ . : -)", q.Queue)
		}
		if q.Limit < 1 || q.Limit > 10000 {
			return fmt.Errorf("--limit must be between 1 and 10000, got %d", q.Limit)
		}
		q.OnlyBlocked = !all
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		keys, err := client.OutboxKeys(ctx, q)
		if err != nil {
			return err
		}
		if asJSON {
			out := make([]keyHeadJSON, len(keys))
			for i, k := range keys {
				out[i] = keyHeadJSON{PartitionKey: k.PartitionKey, HeadID: k.HeadID, MessageID: k.MessageID.String(), Topic: k.Topic,
					Status: k.State, Attempts: k.Attempts, MaxAttempts: k.MaxAttempts, RunAt: k.RunAt, LastError: k.LastError, UpdatedAt: k.UpdatedAt}
			}
			return printJSON(cmd.OutOrStdout(), out)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tHEAD ID\tTOPIC\tSTATUS\tATTEMPTS\tRUN AT\tLAST ERROR")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d/%d\t%s\t%s\n", k.PartitionKey, k.HeadID, k.Topic, k.State,
				k.Attempts, k.MaxAttempts, k.RunAt.Format(time.RFC3339), clip(k.LastError, 60))
		}
		return tw.Flush()
	}
	return cmd
}

// keyHeadJSON is a key of `workq outbox blocked --json`, in the names the
// command has always printed.
type keyHeadJSON struct {
	PartitionKey string    `json:"partition_key"`
	HeadID       int64     `json:"head_id"`
	MessageID    string    `json:"message_id"`
	Topic        string    `json:"topic"`
	Status       string    `json:"status"`
	Attempts     int32     `json:"attempts"`
	MaxAttempts  int32     `json:"max_attempts"`
	RunAt        time.Time `json:"run_at"`
	LastError    string    `json:"last_error,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}
