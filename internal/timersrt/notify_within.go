package timersrt

import (
	"fmt"
	"time"

	"github.com/workq/workq/workqtype"
)

// MaxNotifyWithin is the largest ClientOptions.NotifyWithin: a day. The
// statement adds it to now() as an interval; further than a day, a NOTIFY
// is no sooner than any worker's poll anyway.
const MaxNotifyWithin = 24 * time.Hour

// DefaultNotifyWithin is NotifyWithin's default: the workers' default poll
// interval.
const DefaultNotifyWithin = time.Second

// Validate says what is wrong with o's NotifyWithin (its one bound; the
// other options are checked by the settings they come from).
func (o ClientOptions) Validate() error {
	if o.NotifyWithin > MaxNotifyWithin {
		return workqtype.Invalid("NotifyWithin", fmt.Sprintf("notify within %s: want at most %s (negative: only timers due now notify)", o.NotifyWithin, MaxNotifyWithin))
	}
	return nil
}
