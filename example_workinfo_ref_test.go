package workq_test

import (
	"fmt"

	"github.com/workq/workq"
)

// An event names its item by WorkInfo.Ref, which the operator methods take
// (client.Attempts(ctx, ev.Work.Ref()), client.Retry...).
func ExampleWorkInfo_Ref() {
	ev := workq.Event{Kind: workq.EventFailed, Work: workq.WorkInfo{Table: "job_runs", ID: 42, Shard: "eu"}}
	ref := ev.Work.Ref()
	fmt.Println(ref, ref.Table == workq.TableJobRuns)
	// Output: eu:job_runs/42 true
}
