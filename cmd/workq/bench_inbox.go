package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/workqtype"
)

// inboxBench is `workq bench --receive`: the inbox receive benchmark. It
// receives -n distinct messages in ReceiveMany batches, then --dup-ratio of
// them again (random earlier messages, in batches of the same size), and
// reports rows/s over the whole stream and the cost of a duplicate against
// a new row. With --receive-single K it also times K single Receive calls
// of new messages and K of duplicates. Nothing is worked: receive only.
type inboxBench struct {
	on       bool
	batch    int
	dupRatio float64
	single   int
}

func addInboxBenchFlags(f *pflag.FlagSet) *inboxBench {
	b := &inboxBench{}
	f.BoolVar(&b.on, "receive", false, "inbox receive benchmark: -n distinct messages plus --dup-ratio duplicates (see --receive-batch, --receive-single)")
	f.IntVar(&b.batch, "receive-batch", 1000, "--receive: messages per ReceiveMany")
	f.Float64Var(&b.dupRatio, "dup-ratio", 0.2, "--receive: duplicates as a fraction of -n")
	f.IntVar(&b.single, "receive-single", 0, "--receive: also time this many single Receive calls of new messages and of duplicates")
	return b
}

// inboxBenchResult is what `workq bench --receive` reports.
type inboxBenchResult struct {
	Mode         string  `json:"mode"` // inbox-receive
	New          int     `json:"new"`
	Duplicates   int     `json:"duplicates"`
	Batch        int     `json:"batch"`
	Seconds      float64 `json:"seconds"`
	RowsPerSec   float64 `json:"rows_per_sec"`     // new + duplicates over the whole stream
	NewPerSec    float64 `json:"new_per_sec"`      // the new-message phase alone
	DupPerSec    float64 `json:"dup_per_sec"`      // the duplicate phase alone
	UsPerNew     float64 `json:"us_per_new"`       // microseconds per new row, batched
	UsPerDup     float64 `json:"us_per_duplicate"` // microseconds per duplicate, batched
	DupCostRatio float64 `json:"dup_cost_ratio"`   // us_per_duplicate / us_per_new
	Single       int     `json:"single,omitempty"`
	UsSingleNew  float64 `json:"us_per_single_new,omitempty"`
	UsSingleDup  float64 `json:"us_per_single_duplicate,omitempty"`
	MaxConns     int32   `json:"max_conns"`
}

const inboxBenchSource = "workq-bench"

func (ib *inboxBench) run(ctx context.Context, pool workqtype.DB, maxConns int32, n int, out io.Writer, asJSON bool) error {
	if ib.batch < 1 || ib.dupRatio < 0 || ib.dupRatio > 10 || ib.single < 0 {
		return fmt.Errorf("--receive-batch must be at least 1, --dup-ratio between 0 and 10, --receive-single not negative")
	}
	for _, sql := range []string{
		"delete from workq.inbox where source = '" + inboxBenchSource + "'",
		"delete from workq.runs where work_table = 'inbox' and queue = '" + benchQueue + "'",
		"vacuum analyze workq.inbox",
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("bench reset: %w", err)
		}
	}
	client := inboxrt.NewClient(inboxrt.ClientOptions{})
	msg := func(i int) inbox.Message {
		return inbox.Message{Source: inboxBenchSource, MessageID: "m-" + strconv.Itoa(i), Topic: "bench", Queue: benchQueue,
			Payload: []byte(`{"n": ` + strconv.Itoa(i) + `, "body": "an incoming message of a typical small size, about a hundred bytes"}`)}
	}
	receive := func(msgs []inbox.Message, wantNew bool) error {
		res, err := client.ReceiveMany(ctx, pool, msgs)
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.New() != wantNew {
				return fmt.Errorf("bench: message %s: %+v, want new=%v", msgs[i].MessageID, r, wantNew)
			}
		}
		return nil
	}
	res := inboxBenchResult{Mode: "inbox-receive", New: n, Duplicates: int(float64(n) * ib.dupRatio), Batch: ib.batch, MaxConns: maxConns}
	batch := make([]inbox.Message, 0, ib.batch)
	start := time.Now()
	for i := 0; i < n; i++ {
		batch = append(batch, msg(i))
		if len(batch) == ib.batch || i == n-1 {
			if err := receive(batch, true); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	tNew := time.Since(start)
	// Duplicates: random earlier messages, distinct within a batch.
	rng := rand.New(rand.NewPCG(1, 2))
	start = time.Now()
	seen := map[int]bool{}
	for k := 0; k < res.Duplicates; k++ {
		i := rng.IntN(n)
		for seen[i] {
			i = rng.IntN(n)
		}
		seen[i] = true
		batch = append(batch, msg(i))
		if len(batch) == ib.batch || k == res.Duplicates-1 || len(seen) == n {
			if err := receive(batch, false); err != nil {
				return err
			}
			batch = batch[:0]
			clear(seen)
		}
	}
	tDup := time.Since(start)
	res.Seconds = (tNew + tDup).Seconds()
	res.RowsPerSec = float64(res.New+res.Duplicates) / res.Seconds
	res.NewPerSec = float64(res.New) / tNew.Seconds()
	res.UsPerNew = float64(tNew.Microseconds()) / float64(res.New)
	if res.Duplicates > 0 {
		res.DupPerSec = float64(res.Duplicates) / tDup.Seconds()
		res.UsPerDup = float64(tDup.Microseconds()) / float64(res.Duplicates)
		res.DupCostRatio = res.UsPerDup / res.UsPerNew
	}
	if ib.single > 0 {
		res.Single = ib.single
		start = time.Now()
		for i := 0; i < ib.single; i++ {
			if r, err := client.Receive(ctx, pool, msg(n+i)); err != nil || !r.New() {
				return fmt.Errorf("bench: single receive: %+v, %v", r, err)
			}
		}
		res.UsSingleNew = float64(time.Since(start).Microseconds()) / float64(ib.single)
		start = time.Now()
		for i := 0; i < ib.single; i++ {
			if r, err := client.Receive(ctx, pool, msg(i%n)); err != nil || !r.Duplicate {
				return fmt.Errorf("bench: single receive of a duplicate: %+v, %v", r, err)
			}
		}
		res.UsSingleDup = float64(time.Since(start).Microseconds()) / float64(ib.single)
	}
	if asJSON {
		return printJSON(out, res)
	}
	fmt.Fprintf(out, "inbox receive: %d new + %d duplicates in %.2fs = %.0f rows/s (batch %d, one connection at a time)\n",
		res.New, res.Duplicates, res.Seconds, res.RowsPerSec, res.Batch)
	fmt.Fprintf(out, "  new: %.0f rows/s, %.1f us/row; duplicates: %.0f rows/s, %.1f us/row (%.2fx a new row)\n",
		res.NewPerSec, res.UsPerNew, res.DupPerSec, res.UsPerDup, res.DupCostRatio)
	if res.Single > 0 {
		fmt.Fprintf(out, "  single Receive: %.0f us per new message, %.0f us per duplicate (%d calls each)\n",
			res.UsSingleNew, res.UsSingleDup, res.Single)
	}
	return nil
}
