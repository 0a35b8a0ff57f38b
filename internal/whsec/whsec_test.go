package whsec_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/workq/workq/internal/whsec"
)

func TestParse(t *testing.T) {
	key24, key64 := bytes.Repeat([]byte{1}, 24), bytes.Repeat([]byte{2}, 64)
	padded := "whsec_" + base64.StdEncoding.EncodeToString(key64)      // ends in "=="
	unpadded := "whsec_" + base64.RawStdEncoding.EncodeToString(key64) // the same key without the padding
	cases := []struct {
		name   string
		in     string
		want   [][]byte
		errHas string
	}{
		{"one secret", "whsec_" + base64.StdEncoding.EncodeToString(key24), [][]byte{key24}, ""},
		{"unpadded", unpadded, [][]byte{key64}, ""},
		{"two, extra spaces", "  " + padded + "   whsec_" + base64.StdEncoding.EncodeToString(key24) + " ", [][]byte{key64, key24}, ""},
		{"empty", " ", nil, "empty"},
		{"no prefix", base64.StdEncoding.EncodeToString(key24), nil, `secret 1 of 1 does not start with "whsec_"`},
		{"not base64", "whsec_%%%%", nil, "not base64"},
		{"key too short", "whsec_" + base64.StdEncoding.EncodeToString(key24[:23]), nil, "23 bytes, want 24 to 64"},
		{"key too long", "whsec_" + base64.StdEncoding.EncodeToString(append(key64, 0)), nil, "65 bytes"},
		{"second bad", padded + " whsec_", nil, "secret 2 of 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := whsec.Parse(c.in)
			if c.errHas != "" {
				if !errors.Is(err, whsec.ErrFormat) || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("Parse = %v, want ErrFormat mentioning %q", err, c.errHas)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("Parse = %d keys, %v; want %d", len(got), err, len(c.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], c.want[i]) {
					t.Errorf("key %d = %x, want %x", i, got[i], c.want[i])
				}
			}
		})
	}
}
