package jobq

import "testing"

// boxedString gives each string of a run its own value, and boxes a run of
// equal strings once.
func TestBoxedString(t *testing.T) {
	var b boxedString
	for _, s := range []string{"default", "default", "", "other", "other", "default", ""} {
		if got := b.of(s); got != any(s) {
			t.Errorf("of(%q) = %v", s, got)
		}
	}
	b.of("default")
	if n := testing.AllocsPerRun(100, func() { _ = b.of("default") }); n != 0 {
		t.Errorf("a run of equal strings allocates %.0f times a string, want 0", n)
	}
}
