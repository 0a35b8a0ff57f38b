package ui_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/workq/workq/internal/kinds"
)

// The item pages' per-kind words come from the registry of kinds: the
// nav lists every kind, each page labels its kind column and retry button
// as its kind does, and offers its own state words.
func TestItemPagesFollowTheRegistry(t *testing.T) {
	s := newSite(t)
	b := s.browser()
	b.login(s.admin)
	for _, k := range kinds.All() {
		t.Run(string(k.Table), func(t *testing.T) {
			label := strings.ToUpper(k.KindLabel[:1]) + k.KindLabel[1:]
			retry := strings.ToUpper(k.RetryWord[:1]) + k.RetryWord[1:]
			want := []string{`aria-current="page">` + k.Title + `</a>`, `>` + label + `</label>`, retry + ` selected</button>`}
			for _, w := range k.States {
				if !slices.Contains(kinds.StatusNames, w) {
					want = append(want, `<option value="`+w+`"`)
				}
			}
			for _, o := range kinds.All() {
				want = append(want, `href="../items/`+string(o.Table)+`"`)
			}
			must(t, b.get("/ui/items/"+string(k.Table)), 200, want...)
		})
	}
}
