package worker

// Weighed reports whether every claim loop seated in s has had its first
// backlog read (or the read failed): from then on the shares of the
// contended slots follow the shards' backlogs, before it they are even
// (see Shared). False while no claim loop is seated.
func (s *Shared) Weighed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.groups {
		for _, m := range g.members {
			if !m.weighed {
				return false
			}
			n++
		}
	}
	return n > 0
}
