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
