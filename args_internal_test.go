package workq

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

type emptyArgs struct{}

func (emptyArgs) Kind() string { return "empty" }

type fieldArgs struct {
	N int    `json:"n"`
	S string `json:"s"`
}

func (fieldArgs) Kind() string { return "fields" }

// defaultingArgs sets a default in its own UnmarshalJSON: {} must reach it.
type defaultingArgs struct{ N int }

func (defaultingArgs) Kind() string { return "defaulting" }

func (d *defaultingArgs) UnmarshalJSON(b []byte) error {
	type plain defaultingArgs
	p := plain{N: 7}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = defaultingArgs(p)
	return nil
}

// textArgs decodes from a JSON string: encoding/json refuses {} for it.
type textArgs struct{ S string }

func (textArgs) Kind() string { return "text" }

func (a *textArgs) UnmarshalText(b []byte) error { a.S = string(b); return nil }

type mapArgs map[string]int

func (mapArgs) Kind() string { return "map" }

// A job's args are decoded as encoding/json would, whether or not the
// empty object is skipped: {} leaves a plain struct at its zero value, and
// reaches a type's own UnmarshalJSON or UnmarshalText (which refuses it)
// and a map (empty, not nil).
func TestJobArgsDecode(t *testing.T) {
	raw := func(payload string) *worker.Job {
		return &worker.Job{Item: lease.Item{Table: lease.JobRuns, ID: 1, Kind: "k", Queue: "default", Payload: json.RawMessage(payload), Metadata: json.RawMessage("{}")}}
	}
	check := func(t *testing.T, got, want any, err error, wantErr bool) {
		t.Helper()
		if (err != nil) != wantErr || (err != nil && !worker.IsPermanent(err)) {
			t.Fatalf("error %v; want one (permanent): %v", err, wantErr)
		}
		if !wantErr && !reflect.DeepEqual(got, want) {
			t.Fatalf("args %#v; want %#v", got, want)
		}
	}
	for _, c := range []struct {
		name    string
		payload string
		fill    func(*worker.Job) (any, error)
		want    any
		wantErr bool
	}{
		{"struct{}, {}", "{}", fillAs[emptyArgs], emptyArgs{}, false},
		{"fields, {}", "{}", fillAs[fieldArgs], fieldArgs{}, false},
		{"fields, set", `{"n":3,"s":"x"}`, fillAs[fieldArgs], fieldArgs{N: 3, S: "x"}, false},
		{"fields, not an object", `[1]`, fillAs[fieldArgs], nil, true},
		{"own UnmarshalJSON, {}", "{}", fillAs[defaultingArgs], defaultingArgs{N: 7}, false},
		{"map, {}", "{}", fillAs[mapArgs], mapArgs{}, false},
		{"own UnmarshalText, a string", `"x"`, fillAs[textArgs], textArgs{S: "x"}, false},
		{"own UnmarshalText, {}: refused as by encoding/json", "{}", fillAs[textArgs], nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.fill(raw(c.payload))
			check(t, got, c.want, err, c.wantErr)
			if c.name == "map, {}" && got.(mapArgs) == nil {
				t.Fatal("{} decoded into a nil map; want an empty one, as encoding/json")
			}
		})
	}
}

func fillAs[T Args](raw *worker.Job) (any, error) {
	j := new(Job[T])
	err := j.fillArgs(raw, decodesEmptyArgs[T]())
	return j.Args, err
}

// BenchmarkJobFill is the typed handler's view of a claimed job: empty
// args and metadata, as the bench's and River's jobs carry.
func BenchmarkJobFill(b *testing.B) {
	raw := &worker.Job{Item: lease.Item{Table: lease.JobRuns, ID: 1, Kind: "empty", Queue: "default", Payload: json.RawMessage("{}"), Metadata: json.RawMessage("{}")}}
	decodeEmpty := decodesEmptyArgs[emptyArgs]()
	b.ReportAllocs()
	for b.Loop() {
		j := new(Job[emptyArgs])
		if err := j.fillArgs(raw, decodeEmpty); err != nil {
			b.Fatal(err)
		}
	}
}
