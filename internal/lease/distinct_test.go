package lease

import (
	"testing"

	"github.com/google/uuid"
)

func TestDistinctAttempts(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	tests := []struct {
		name string
		cs   []Completion
		dup  bool
	}{
		{"none", nil, false},
		{"one", []Completion{{ID: 1, Token: a}}, false},
		{"distinct ids, one claim", []Completion{{ID: 1, Token: a}, {ID: 2, Token: a}, {ID: 3, Token: a}}, false},
		{"an id under two claims", []Completion{{ID: 1, Token: a}, {ID: 1, Token: b}}, false},
		{"an id under three claims", []Completion{{ID: 1, Token: a}, {ID: 1, Token: b}, {ID: 1, Token: c}}, false},
		{"an attempt twice", []Completion{{ID: 1, Token: a}, {ID: 2, Token: a}, {ID: 1, Token: a}}, true},
		{"the first claim's attempt after another's", []Completion{{ID: 1, Token: a}, {ID: 1, Token: b}, {ID: 1, Token: a}}, true},
		{"a later claim's attempt twice", []Completion{{ID: 1, Token: a}, {ID: 1, Token: b}, {ID: 1, Token: c}, {ID: 1, Token: b}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := distinctAttempts(tc.cs)
			if (err != nil) != tc.dup {
				t.Errorf("distinctAttempts = %v; want a duplicate reported: %v", err, tc.dup)
			}
		})
	}
}

// TestTokenSet checks the positions Engine.Complete sends for the batch's
// owner tokens: every completion's position names its own token, and each
// token is listed once, in the order first seen, whether the batch holds
// one claim, runs of a few, tokens that come back after others, or more
// than the short list's bound (the map takes over).
func TestTokenSet(t *testing.T) {
	many := make([]uuid.UUID, 40)
	for i := range many {
		many[i] = uuid.New()
	}
	a, b, c := many[0], many[1], many[2]
	tests := []struct {
		name     string
		tokens   []uuid.UUID
		distinct int
	}{
		{"one claim", []uuid.UUID{a, a, a}, 1},
		{"runs", []uuid.UUID{a, a, b, b, c}, 3},
		{"back and forth", []uuid.UUID{a, b, a, c, b, a}, 3},
		{"more than the list's bound", append(append([]uuid.UUID{}, many...), many[3], many[30], many[17], many[0]), 40},
		{"the map, back and forth", append(append([]uuid.UUID{}, many[:20]...), many[19], many[5], many[19], many[25], many[25], many[2]), 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s tokenSet
			for i, tok := range tt.tokens {
				n := s.of(tok)
				if n < 1 || int(n) > len(s.list) || s.list[n-1] != tok {
					t.Fatalf("completion %d: position %d does not name its token %s (list %v)", i, n, tok, s.list)
				}
			}
			if len(s.list) != tt.distinct {
				t.Errorf("listed %d tokens, want %d distinct: %v", len(s.list), tt.distinct, s.list)
			}
			seen := map[uuid.UUID]bool{}
			for _, u := range s.list {
				if seen[u] {
					t.Errorf("token %s listed twice", u)
				}
				seen[u] = true
			}
		})
	}
}
