package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// The kinds of the workflow Examples.

// CountWordsArgs counts the words of a text; its output is the count.
type CountWordsArgs struct {
	Text string `json:"text"`
}

func (CountWordsArgs) Kind() string { return "example.words.count" }

// TotalWordsArgs adds the counts of the tasks it names.
type TotalWordsArgs struct {
	Of []string `json:"of"`
}

func (TotalWordsArgs) Kind() string { return "example.words.total" }

// exampleWordWorkers registers the two kinds: a count records its output
// with SetOutput; a total reads its dependencies' outputs, typed, with
// workq.Output.
func exampleWordWorkers() *workq.Workers {
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[CountWordsArgs]) error {
		return job.SetOutput(len(strings.Fields(job.Args.Text)))
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[TotalWordsArgs]) error {
		total := 0
		for _, task := range job.Args.Of {
			n, err := workq.Output[int](ctx, job, task)
			if err != nil {
				return workq.Permanent(err) // cannot get better on a retry
			}
			total += n
		}
		return job.SetOutput(total)
	}))
	return workers
}

// exampleWaitCtx bounds an Example's waits.
func exampleWaitCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// A fan-out and fan-in: three counts run at once, and the total runs once
// all three are done, reading their outputs. Wait returns when every task
// has ended; WorkflowTasks lists them with their outputs.
func ExampleClient_NewWorkflow() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Workers: exampleWordWorkers(),
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	wf := client.NewWorkflow("word-count", &workq.WorkflowOpts{Metadata: map[string]string{"book": "demo"}})
	parts := []string{"one two three", "four five", "six"}
	var names []string
	for i, text := range parts {
		name := fmt.Sprintf("count-%d", i)
		names = append(names, name)
		wf.Add(name, CountWordsArgs{Text: text}, nil)
	}
	wf.Add("total", TotalWordsArgs{Of: names}, &workq.TaskOpts{DependsOn: names})
	res, err := wf.Enqueue(ctx) // one transaction; a bad shape (a cycle, an unknown name) writes nothing
	must(err)
	fmt.Println("tasks written:", len(res.Tasks))

	wctx, cancel := exampleWaitCtx()
	defer cancel()
	info, err := wf.Wait(wctx)
	must(err)
	fmt.Println(info.Name, info.State, "done", info.Done, "of", info.Tasks)
	tasks, err := client.WorkflowTasks(ctx, res.Workflow)
	must(err)
	for _, t := range tasks {
		fmt.Println(t.Name, t.State, string(t.Output), t.DependsOn)
	}
	// Output:
	// tasks written: 4
	// word-count completed done 4 of 4
	// count-0 done 3 []
	// count-1 done 2 []
	// count-2 done 1 []
	// total done 6 [count-0 count-1 count-2]
}

// CrawlReportArgs builds a report from what the task "fetch" found.
type CrawlReportArgs struct{}

func (CrawlReportArgs) Kind() string { return "example.crawl.report" }

// FetchArgs fetches a page; its output is a Page.
type FetchArgs struct {
	URL string `json:"url"`
}

func (FetchArgs) Kind() string { return "example.fetch" }

// Page is what a fetch found.
type Page struct {
	Title string `json:"title"`
	Links int    `json:"links"`
}

// Output reads the output of another task of the job's workflow, decoded
// into the type given: here the Page that the task "fetch" recorded. The
// task must have ended done (the edge DependsOn sees to that); a name the
// workflow does not have is ErrNotFound.
func ExampleOutput() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	report := make(chan string, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[FetchArgs]) error {
		return job.SetOutput(Page{Title: "Home of " + job.Args.URL, Links: 12})
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[CrawlReportArgs]) error {
		page, err := workq.Output[Page](ctx, job, "fetch")
		if err != nil {
			return err
		}
		_, missing := workq.Output[Page](ctx, job, "no-such-task")
		report <- fmt.Sprintf("%q has %d links; another name: not found %v", page.Title, page.Links, errors.Is(missing, workq.ErrNotFound))
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	_, err = client.NewWorkflow("crawl", nil).
		Add("fetch", FetchArgs{URL: "example.com"}, nil).
		Add("report", CrawlReportArgs{}, &workq.TaskOpts{DependsOn: []string{"fetch"}}).
		Enqueue(ctx)
	must(err)
	select {
	case r := <-report:
		fmt.Println(r)
	case <-time.After(30 * time.Second):
		fmt.Println("no report")
	}
	// Output:
	// "Home of example.com" has 12 links; another name: not found true
}

// ImportRowArgs imports one row; a row without an email fails for good.
type ImportRowArgs struct {
	Email string `json:"email"`
}

func (ImportRowArgs) Kind() string { return "example.import.row" }

// ImportDoneArgs is the batch's callback.
type ImportDoneArgs struct {
	File string `json:"file"`
}

func (ImportDoneArgs) Kind() string { return "example.import.done" }

// A batch: its jobs run as tasks "0", "1"..., and the callback runs once
// all of them have ended, however they ended; BatchResults counts them.
// A batch with a failed job ends failed, after its callback has run.
func ExampleClient_NewBatch() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	summary := make(chan string, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ImportRowArgs]) error {
		if job.Args.Email == "" {
			return workq.Permanent(errors.New("no email"))
		}
		return nil
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ImportDoneArgs]) error {
		n, err := workq.BatchResults(ctx, job)
		if err != nil {
			return err
		}
		summary <- fmt.Sprintf("%s: %d of %d imported, %d failed, %d cancelled", job.Args.File, n.Done, n.Total, n.Failed, n.Cancelled)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	var rows []workq.EnqueueParams
	for _, email := range []string{"ann@example.com", "", "bob@example.com"} {
		rows = append(rows, workq.EnqueueParams{Args: ImportRowArgs{Email: email}})
	}
	batch := client.NewBatch("import users.csv", rows, ImportDoneArgs{File: "users.csv"}, nil)
	res, err := batch.Enqueue(ctx)
	must(err)
	fmt.Println("tasks:", len(res.Tasks), "callback is a task:", res.Tasks[workq.BatchCallback] != 0)

	wctx, cancel := exampleWaitCtx()
	defer cancel()
	info, err := batch.Wait(wctx)
	must(err)
	fmt.Println(<-summary)
	fmt.Println("batch", info.State, "done", info.Done, "failed", info.Failed)
	// Output:
	// tasks: 4 callback is a task: true
	// users.csv: 2 of 3 imported, 1 failed, 0 cancelled
	// batch failed done 3 failed 1
}

// SplitArgs splits a text into one count per line, added to its own
// workflow, and a total after them.
type SplitArgs struct {
	Text string `json:"text"`
}

func (SplitArgs) Kind() string { return "example.split" }

// AddTasks fans out over what the task found: the handler adds a count per
// line and a total after them to its own workflow, in its transaction,
// with CompleteTx: the new tasks and "split done" commit together, or
// neither does. The workflow then waits for the added tasks too.
func ExampleJob_AddTasks() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	workers := exampleWordWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[SplitArgs]) error {
		add, err := job.AddTasks(ctx)
		if err != nil {
			return err
		}
		var names []string
		for i, line := range strings.Split(job.Args.Text, "\n") {
			name := fmt.Sprintf("line-%d", i)
			names = append(names, name)
			// Depending on "split", which ends in this transaction: the
			// counts become ready when it commits.
			add.Add(name, CountWordsArgs{Text: line}, &workq.TaskOpts{DependsOn: []string{"split"}})
		}
		add.Add("total", TotalWordsArgs{Of: names}, &workq.TaskOpts{DependsOn: names})
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := add.EnqueueTx(ctx, tx); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	wf := client.NewWorkflow("dynamic count", nil).
		Add("split", SplitArgs{Text: "a b c\nd e\nf g h i"}, nil)
	res, err := wf.Enqueue(ctx)
	must(err)
	fmt.Println("tasks at first:", len(res.Tasks))

	wctx, cancel := exampleWaitCtx()
	defer cancel()
	info, err := wf.Wait(wctx)
	must(err)
	fmt.Println(info.State, "with", info.Tasks, "tasks")
	tasks, err := client.WorkflowTasks(ctx, res.Workflow)
	must(err)
	for _, t := range tasks {
		fmt.Printf("%s %s output=%s\n", t.Name, t.State, t.Output)
	}
	// Output:
	// tasks at first: 1
	// completed with 5 tasks
	// split done output=
	// line-0 done output=3
	// line-1 done output=2
	// line-2 done output=4
	// total done output=9
}

// Wait waits for one job run to end, woken by the database's notification,
// and returns its state and output: here a task of a workflow, but any job
// run can be waited for (a plain Enqueue's too).
func ExampleClient_Wait() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Workers: exampleWordWorkers(),
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	wctx, cancel := exampleWaitCtx()
	defer cancel()

	job, err := client.Enqueue(ctx, CountWordsArgs{Text: "to be or not to be"}, nil)
	must(err)
	end, err := client.Wait(wctx, workq.ItemRef{Table: workq.TableJobRuns, ID: job.ID, Shard: job.Shard})
	must(err)
	fmt.Println("job:", end.State, string(end.Output))

	res, err := client.NewWorkflow("pair", nil).
		Add("a", CountWordsArgs{Text: "x y"}, nil).
		Add("b", CountWordsArgs{Text: "z"}, nil).
		Add("sum", TotalWordsArgs{Of: []string{"a", "b"}}, &workq.TaskOpts{DependsOn: []string{"a", "b"}}).
		Enqueue(ctx)
	must(err)
	end, err = client.Wait(wctx, workq.ItemRef{Table: workq.TableJobRuns, ID: res.Tasks["sum"], Shard: res.Workflow.Shard})
	must(err)
	fmt.Println("task sum:", end.State, string(end.Output))
	// Output:
	// job: done 6
	// task sum: done 3
}

// SlowArgs runs until its context is cancelled.
type SlowArgs struct{}

func (SlowArgs) Kind() string { return "example.slow" }

// CancelWorkflow ends a workflow: its pending and ready tasks are
// cancelled at once, its running tasks are asked to stop (their handlers'
// contexts are cancelled), and the workflow ends cancelled once they have
// returned. RetryWorkflow would bring the cancelled tasks back.
func ExampleClient_CancelWorkflow() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	started := make(chan struct{})
	workers := exampleWordWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[SlowArgs]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx) // workq.ErrCancelled
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	res, err := client.NewWorkflow("long", nil).
		Add("slow", SlowArgs{}, nil).
		Add("after", CountWordsArgs{Text: "never counted"}, &workq.TaskOpts{DependsOn: []string{"slow"}}).
		Add("cleanup", CountWordsArgs{Text: "runs anyway"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"slow"}}).
		Enqueue(ctx)
	must(err)
	<-started

	r, err := client.CancelWorkflow(ctx, res.Workflow, &workq.ActionOpts{Actor: "ops:ann", Reason: "wrong input"})
	must(err)
	fmt.Println("cancelled at once:", r.Cancelled, "asked to stop:", r.Requested)

	wctx, cancel := exampleWaitCtx()
	defer cancel()
	info, err := client.WaitWorkflow(wctx, res.Workflow)
	must(err)
	fmt.Println(info.State, "cancelled", info.Cancelled, "of", info.Tasks)
	_, err = client.CancelWorkflow(ctx, res.Workflow, nil)
	fmt.Println("again:", errors.Is(err, workq.ErrWorkflowEnded))
	// Output:
	// cancelled at once: 2 asked to stop: 1
	// cancelled cancelled 3 of 3
	// again: true
}

// FlakyArgs fails until its flag says otherwise.
type FlakyArgs struct{}

func (FlakyArgs) Kind() string { return "example.flaky" }

// A task fails for good and cancels its dependent; the workflow fails.
// Once the cause is fixed, RetryWorkflow runs the failed task again, its
// dependent comes back pending and runs after it, and the workflow
// completes.
func ExampleClient_RetryWorkflow() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	var fixed atomic.Bool
	workers := exampleWordWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[FlakyArgs]) error {
		if !fixed.Load() {
			return workq.Permanent(errors.New("upstream down"))
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	res, err := client.NewWorkflow("sync", nil).
		Add("pull", FlakyArgs{}, nil).
		Add("count", CountWordsArgs{Text: "after the pull"}, &workq.TaskOpts{DependsOn: []string{"pull"}}).
		Enqueue(ctx)
	must(err)
	wctx, cancel := exampleWaitCtx()
	defer cancel()
	info, err := client.WaitWorkflow(wctx, res.Workflow)
	must(err)
	fmt.Println(info.State, "failed", info.Failed, "cancelled", info.Cancelled)

	fixed.Store(true)
	n, err := client.RetryWorkflow(ctx, res.Workflow, &workq.ActionOpts{Actor: "ops:ann", Reason: "upstream back"})
	must(err)
	fmt.Println("revived:", n)
	info, err = client.WaitWorkflow(wctx, res.Workflow)
	must(err)
	fmt.Println(info.State, "done", info.Done, "of", info.Tasks)
	// Output:
	// failed failed 1 cancelled 1
	// revived: 1
	// completed done 2 of 2
}
