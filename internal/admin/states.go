package admin

import "slices"

// statuses are the statuses f asks for (Status and Statuses), each once,
// by their lease names, in the order given; nil: any.
func (f Filter) statuses() []string {
	var out []string
	for _, s := range append([]string{f.Status}, f.Statuses...) {
		if s == "" {
			continue
		}
		st, err := ParseStatus(s)
		if err != nil {
			continue // Validate reports it
		}
		if name := st.String(); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// listStatuses is List of several statuses: one page per status (each
// from the same cursor, through its own index), merged newest first. Each
// page is a prefix of its status's items below the cursor, and its Next
// is where its status's items stop being read (every id at or above it
// was read). So the merged page takes only the items at or above the
// highest of those positions, and goes on below the last id it took or
// that position: no item is repeated or skipped, whatever the windows of
// an error-text search read.
func listStatuses(f Filter, statuses []string, list func(Filter) (Page, error)) (Page, error) {
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var items []Item
	var floor int64 // every status was read down to it (0: to the end)
	for _, s := range statuses {
		g := f
		g.Status, g.Statuses = s, nil
		p, err := list(g)
		if err != nil {
			return Page{}, err
		}
		items = append(items, p.Items...)
		floor = max(floor, p.Next)
	}
	slices.SortFunc(items, func(a, b Item) int {
		switch {
		case a.ID > b.ID:
			return -1
		case a.ID < b.ID:
			return 1
		}
		return 0
	})
	n := 0
	for n < len(items) && n < limit && items[n].ID >= floor {
		n++
	}
	p := Page{Items: items[:n:n], Next: floor}
	if n == limit && n < len(items) {
		p.Next = items[n-1].ID
	}
	if p.Items == nil {
		p.Items = []Item{}
	}
	return p, nil
}
