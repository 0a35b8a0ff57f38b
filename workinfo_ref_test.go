package workq

import "testing"

func TestWorkInfoRef(t *testing.T) {
	for _, tc := range []struct {
		in   WorkInfo
		want ItemRef
	}{
		{WorkInfo{Table: "job_runs", ID: 7}, ItemRef{Table: TableJobRuns, ID: 7}},
		{WorkInfo{Table: "outbox", ID: 9, Shard: "eu"}, ItemRef{Table: TableOutbox, ID: 9, Shard: "eu"}},
		{WorkInfo{Table: "timers", ID: 1, Shard: "us"}, ItemRef{Table: TableTimers, ID: 1, Shard: "us"}},
	} {
		if got := tc.in.Ref(); got != tc.want {
			t.Errorf("%+v.Ref() = %+v, want %+v", tc.in, got, tc.want)
		}
		if err := validateRef(tc.in.Ref()); err != nil {
			t.Errorf("%+v.Ref() is not a valid ref: %v", tc.in, err)
		}
	}
}
