package config

import (
	"regexp"
	"strings"
	"testing"
)

// The rule as the schema's workq_name domain writes it.
var domainRule = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

func TestValidName(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{"default", true},
		{"a", true},
		{"Queue_1.billing:eu-west", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{strings.Repeat("x", 129), false},
		{"has space", false},
		{"slash/ed", false},
		{"ümlaut", false},
		{"semi;colon", false},
		{"new\nline", false},
		{"tab\t", false},
		{"percent%", false},
	}
	for _, c := range cases {
		if got := ValidName(c.name); got != c.want {
			t.Errorf("ValidName(%q) = %v, want %v", c.name, got, c.want)
		}
	}
	// Every single byte: the loop accepts exactly what the domain's regex does.
	for b := 0; b < 256; b++ {
		s := string([]byte{byte(b)})
		if want := domainRule.MatchString(s); ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v, want %v (the schema's rule)", s, !want, want)
		}
	}
}
