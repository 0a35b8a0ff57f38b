package workqtype

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

func TestValidTopic(t *testing.T) {
	cases := []struct {
		topic string
		want  bool
	}{
		{"order.created", true},
		{"with space inside", true},
		{"ümlaut/→", true},
		{"tab\tinside", false},
		{strings.Repeat("t", 256), true},
		{"", false},
		{strings.Repeat("t", 257), false},
		{" leading", false},
		{"trailing ", false},
		{"new\nline", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"c1 \u0085 next line", false}, // NEL, a C1 control character (issue 18)
		{"c1 first \u0080", false},     // the first of C1
		{"c1 last \u009f", false},      // the last of C1
		{"after c1 \u00a0nbsp", true},  // U+00A0 is not a control character
		{"not UTF-8 \xff", false},
		{"surrogate as UTF-8 \xed\xa0\x80", false},
	}
	for _, c := range cases {
		if got := ValidTopic(c.topic); got != c.want {
			t.Errorf("ValidTopic(%q) = %v, want %v", c.topic, got, c.want)
		}
	}
}
