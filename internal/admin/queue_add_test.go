package admin

import (
	"testing"
	"time"
)

// Add sums one queue's rows over shards: counts and rates add up, the
// oldest ready age is the older one, and the pause and limit stay the
// receiver's (each shard's own).
func TestQueueAdd(t *testing.T) {
	w := int32(5)
	for _, tc := range []struct {
		name string
		a, b Queue
		want Queue
	}{
		{
			name: "zero plus a row",
			b:    Queue{Ready: 1, Scheduled: 2, InProgress: 3, Expired: 1, Done: 4, Failed: 5, Cancelled: 6, OldestReadyAge: Duration(time.Second), ClaimsPerSecond: 1.5, CompletionsPerSecond: 2.5, Paused: true, Limit: &w},
			want: Queue{Ready: 1, Scheduled: 2, InProgress: 3, Expired: 1, Done: 4, Failed: 5, Cancelled: 6, OldestReadyAge: Duration(time.Second), ClaimsPerSecond: 1.5, CompletionsPerSecond: 2.5},
		},
		{
			name: "two rows",
			a:    Queue{Ready: 10, Done: 1, OldestReadyAge: Duration(3 * time.Second), ClaimsPerSecond: 1},
			b:    Queue{Ready: 5, Done: 2, OldestReadyAge: Duration(time.Second), ClaimsPerSecond: 2},
			want: Queue{Ready: 15, Done: 3, OldestReadyAge: Duration(3 * time.Second), ClaimsPerSecond: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a
			got.Add(tc.b)
			if got.Ready != tc.want.Ready || got.Scheduled != tc.want.Scheduled || got.InProgress != tc.want.InProgress ||
				got.Expired != tc.want.Expired || got.Done != tc.want.Done || got.Failed != tc.want.Failed ||
				got.Cancelled != tc.want.Cancelled || got.OldestReadyAge != tc.want.OldestReadyAge ||
				got.ClaimsPerSecond != tc.want.ClaimsPerSecond || got.CompletionsPerSecond != tc.want.CompletionsPerSecond ||
				got.Paused != tc.want.Paused || got.Limit != tc.want.Limit {
				t.Errorf("Add: got %+v, want %+v", got, tc.want)
			}
		})
	}
}
