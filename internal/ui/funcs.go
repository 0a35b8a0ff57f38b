package ui

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ts":      formatTime,
	"tsp":     func(t *time.Time) string { return formatTimePtr(t) },
	"ago":     ago,
	"secs":    seconds,
	"trunc":   truncate,
	"num":     number,
	"pct":     percent,
	"add":     func(a, b int) int { return a + b },
	"join":    func(s []string) string { return strings.Join(s, ", ") },
	"i32":     func(p *int32) string { return deref32(p) },
	"isoTime": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
	"deref64": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"int64": func(n int) int64 { return int64(n) },
	"dur":   func(s float64) string { return time.Duration(s * float64(time.Second)).String() },
	"sub":   func(a, b int64) int64 { return a - b },
	"list":  func(s ...string) []string { return s },
	"took":  func(a, b time.Time) string { return b.Sub(a).Round(time.Millisecond).String() },
	// The registry of kinds, for the templates: the nav's item pages, what
	// a table calls an item's kind, its retry button and its own state
	// words.
	"kindPages":  kindNav,
	"kindLabel":  kindLabel,
	"retryLabel": func(t any) string { return kindPageOf(tmplTable(t)).RetryLabel },
	"ownStates":  ownStates,
	// Flow control's words (flow.go).
	"flowRate":  flowRate,
	"flowScope": flowScope,
	"ruleScope": ruleScope,
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return formatTime(*t)
}

// ago says how long before now t was (or "in ..." for the future).
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + short(-d)
	}
	return short(d) + " ago"
}

func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// seconds shows a duration given in seconds ("–" for 0).
func seconds(s float64) string {
	if s <= 0 {
		return "–"
	}
	return short(time.Duration(s * float64(time.Second)))
}

// truncate cuts s to at most n characters, with an ellipsis.
func truncate(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// number writes n with thousands separators.
func number(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// percent is part of whole in percent (0 when whole is 0).
func percent(part, whole int) int {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}

func deref32(p *int32) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(int(*p))
}
