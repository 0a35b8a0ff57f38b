package hookpost

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter: seconds, an HTTP-date, and the default and cap.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", DefaultRetryAfter},
		{"2", 2 * time.Second},
		{" 0 ", 0},
		{"-3", DefaultRetryAfter},
		{"1.5", DefaultRetryAfter},
		{"soon", DefaultRetryAfter},
		{"86400", MaxRetryAfter},
		{"99999999999999999999", DefaultRetryAfter}, // overflows: malformed
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(time.Hour).Format(http.TimeFormat), MaxRetryAfter},
	} {
		if got := RetryAfter(c.v, now); got != c.want {
			t.Errorf("RetryAfter(%q) = %s, want %s", c.v, got, c.want)
		}
	}
}
