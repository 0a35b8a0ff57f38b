package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/workqtype"
)

// FuzzParseCron: any expression and time zone either parse or give an
// error wrapping workqtype.ErrInvalid, never a panic; a parsed expression's
// slots come after the time asked and in increasing order. The seed corpus
// (below and in testdata/fuzz) runs in every `go test`; `make fuzz` runs
// the fuzzer.
func FuzzParseCron(f *testing.F) {
	for _, s := range []struct{ expr, tz string }{
		{"0 3 * * *", "Europe/Berlin"}, {"*/5 * * * *", ""}, {"@hourly", "UTC"}, {"@every 90s", ""},
		{"0 0 30 2 *", ""}, {"0 2 * * *", "America/New_York"}, {"30 0 * * *", "America/Santiago"},
		{"* * * * * *", ""}, {"61 * * * *", ""}, {"", ""}, {"@every -1s", ""}, {"0 3 * * *", "Mars/Base"},
		{"0 0 * * 0-7", ""}, {"@every 0s", ""}, {"0 0 1 1 *", "Local"}, {"\x00", "\x00"},
	} {
		f.Add(s.expr, s.tz)
	}
	base := time.Date(2030, 3, 30, 23, 59, 59, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr, tz string) {
		e, err := schedule.ParseCron(expr, tz)
		if err != nil {
			if !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("ParseCron(%q, %q): %v does not wrap ErrInvalid", expr, tz, err)
			}
			return
		}
		first := e.First(base)
		if !first.IsZero() && !first.After(base) {
			t.Fatalf("ParseCron(%q, %q): first slot %v is not after %v", expr, tz, first, base)
		}
		prev := base
		for _, s := range e.Next(base, 5) {
			if !s.After(prev) {
				t.Fatalf("ParseCron(%q, %q): slot %v does not follow %v", expr, tz, s, prev)
			}
			prev = s
		}
	})
}
