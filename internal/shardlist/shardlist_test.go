package shardlist

import (
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/admin"
)

func TestParseCursor(t *testing.T) {
	good := Cursor{"eu": 11, "us": 0}
	for _, c := range []struct {
		name, in string
		want     Cursor
		err      string
	}{
		{"round trip", good.String(), good, ""},
		{"empty object", Cursor{}.String(), Cursor{}, ""},
		{"not base64", "!!", nil, "not a cursor of this list: pass next_cursor of the previous page as it is"},
		{"a plain id", "123", nil, "not a cursor of this list: pass next_cursor of the previous page as it is"},
		{"negative", Cursor{"eu": -1}.String(), nil, "not a cursor of this list: shard eu at -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseCursor(c.in)
			if c.err != "" {
				if err == nil || err.Error() != c.err || !errors.Is(err, ErrBadCursor) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("%v %v, want %v", got, err, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("%v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestNewer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		a, b admin.Item
		want bool
	}{
		{"created later", admin.Item{CreatedAt: t0.Add(time.Second)}, admin.Item{CreatedAt: t0, ID: 9}, true},
		{"created earlier", admin.Item{CreatedAt: t0}, admin.Item{CreatedAt: t0.Add(time.Second)}, false},
		{"same time: shard name first", admin.Item{CreatedAt: t0, Shard: "eu", ID: 1}, admin.Item{CreatedAt: t0, Shard: "us", ID: 9}, true},
		{"same time and shard: higher id", admin.Item{CreatedAt: t0, Shard: "eu", ID: 2}, admin.Item{CreatedAt: t0, Shard: "eu", ID: 1}, true},
	} {
		if got := Newer(c.a, c.b); got != c.want {
			t.Errorf("%s: Newer = %v", c.name, got)
		}
	}
}
