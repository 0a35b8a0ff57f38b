package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// TestEnqueueRejectsInvalidPayloads: a payload the client rejects is rejected
// alike by Validate, Enqueue and EnqueueMany, with an error that wraps
// ErrInvalid and says what is wrong, and nothing reaches job_runs. Before
// these checks, the jsonb cases passed Validate and failed in PostgreSQL,
// and non-objects and payloads of any size were stored.
func TestEnqueueRejectsInvalidPayloads(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	overDefault := `{"s":"` + strings.Repeat("x", 1<<20) + `"}` // 1 MiB + 8 bytes
	cases := []struct {
		name    string
		opts    jobq.Options
		payload any
		want    string // a substring of the error
	}{
		// jsonb cannot store these; encoding/json accepts them.
		{name: `\u0000 in a value`, payload: raw(`{"a":"x\u0000y"}`), want: `contains \u0000 (NUL), which PostgreSQL's jsonb cannot store`},
		{name: `\u0000 in a key`, payload: raw(`{"\u0000":1}`), want: `contains \u0000 (NUL)`},
		{name: `\u0000 deep inside, as []byte`, payload: []byte(`{"a":[{"b":"\\\u0000"}]}`), want: `contains \u0000 (NUL)`},
		{name: "NUL in a Go string", payload: map[string]string{"a": "x\x00y"}, want: `contains \u0000 (NUL)`},
		{name: "lone high surrogate", payload: raw(`{"a":"\ud800"}`), want: `\ud800, a high surrogate without a low one`},
		{name: "high surrogate before a non-surrogate", payload: raw(`{"a":"\uD800\u0041"}`), want: `\ud800, a high surrogate without a low one`},
		{name: "lone low surrogate", payload: raw(`{"a":"\udc00x"}`), want: `\udc00, a low surrogate without a high one`},
		{name: "invalid UTF-8", payload: []byte("{\"a\":\"\xff\"}"), want: "payload is not valid UTF-8"},
		{name: "number above numeric's range", payload: raw(`{"a":1e131072}`), want: "has the number 1e131072, outside the range of PostgreSQL's numeric"},
		{name: "number with too many decimals", payload: raw(`{"a":1.0e-16383}`), want: "outside the range of PostgreSQL's numeric"},
		{name: "zero with a huge exponent", payload: raw(`{"a":0e1073741823}`), want: "outside the range of PostgreSQL's numeric"},
		{name: "json.Number above numeric's range", payload: map[string]any{"n": json.Number("-12.5e131071")}, want: "has the number -12.5e131071"},

		// Payloads are JSON objects.
		{name: "number", payload: raw(`42`), want: "payload must be a JSON object ({...}), got a number"},
		{name: "string", payload: raw(` "x"`), want: "got a string"},
		{name: "array", payload: raw(`[1]`), want: "got an array"},
		{name: "null", payload: raw(`null`), want: "got null"},
		{name: "boolean", payload: []byte(`true`), want: "got a boolean"},
		{name: "Go slice", payload: []int{1}, want: "got an array"},
		{name: "Go string", payload: "x", want: "got a string"},
		{name: "Go nil map", payload: map[string]any(nil), want: "got null"},
		{name: "not JSON", payload: raw(`{bad`), want: "payload is not valid JSON"},
		{name: "empty raw JSON", payload: raw(``), want: "payload is not valid JSON"},

		// Size.
		{name: "over the default limit", payload: raw(overDefault), want: "payload is 1048584 bytes, more than the limit of 1048576 bytes"},
		{name: "marshaled over the default limit", payload: map[string]string{"s": strings.Repeat("x", 1<<20)}, want: "payload is 1048584 bytes, more than the limit of 1048576 bytes"},
		{name: "over a set limit", opts: jobq.Options{MaxPayloadBytes: 16}, payload: raw(`{"s":"0123456789"}`), want: "payload is 18 bytes, more than the limit of 16 bytes"},
		{name: "negative limit", opts: jobq.Options{MaxPayloadBytes: -1}, want: "payload limit must be between 1 and 268435456 bytes (0: the default, 1048576), got -1"},
		{name: "limit above the ceiling", opts: jobq.Options{MaxPayloadBytes: 256<<20 + 1}, want: "got 268435457"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := jobq.New(tc.opts)
			job := jobq.Job{Kind: "k", Payload: tc.payload}
			before := countJobRuns(t, pool)
			check := func(how string, err error) {
				t.Helper()
				if err == nil {
					t.Errorf("%s accepted the payload, want an error mentioning %q", how, tc.want)
					return
				}
				if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: error %q; want one line wrapping ErrInvalid and mentioning %q", how, err, tc.want)
				}
			}
			check("Validate", c.Validate(job))
			_, err := c.Enqueue(ctx, pool, job)
			check("Enqueue", err)
			_, err = c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "fine"}, job})
			check("EnqueueMany", err)
			if after := countJobRuns(t, pool); after != before {
				t.Errorf("job_runs had %d rows before and %d after a rejected payload", before, after)
			}
		})
	}
	var tooLarge *workqtype.PayloadTooLargeError
	if err := jobq.New(jobq.Options{}).Validate(jobq.Job{Kind: "k", Payload: raw(overDefault)}); !errors.As(err, &tooLarge) ||
		*tooLarge != (workqtype.PayloadTooLargeError{Size: len(overDefault), Limit: 1 << 20}) {
		t.Errorf("error %v: want a *PayloadTooLargeError{Size: %d, Limit: %d}", err, len(overDefault), 1<<20)
	}
}

// TestEnqueueAcceptsPayloadsAtTheEdges: what PostgreSQL's jsonb stores
// passes the checks, right up to each limit, and is stored as given.
func TestEnqueueAcceptsPayloadsAtTheEdges(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	atLimit := func(n int) string { return `{"s":"` + strings.Repeat("x", n-8) + `"}` }
	cases := []struct {
		name    string
		opts    jobq.Options
		payload any
		stored  string // the payload as jsonb text, compared as jsonb
	}{
		{name: "nil is an empty object", payload: nil, stored: `{}`},
		{name: "escaped backslash before u0000", payload: json.RawMessage(`{"a":"\\u0000"}`), stored: `{"a":"\\u0000"}`},
		{name: "surrogate pair", payload: json.RawMessage(`{"a":"\ud83d\ude00"}`), stored: `{"a":"😀"}`},
		{name: "other escapes", payload: json.RawMessage(`{"a":"\u0001\t\"\/\u00e9"}`), stored: `{"a":"\u0001\t\"/é"}`},
		{name: "numbers at numeric's limits", payload: json.RawMessage(`{"a":1e131071,"b":-0.0001e131075,"c":1e-16383,"d":0e-16383,"e":1.0000e-16379,"f":0e1073741822}`),
			stored: `{"a":1e131071,"b":-1e131071,"c":1e-16383,"d":0e-16383,"e":1.0000e-16379,"f":0}`},
		{name: "whitespace around the object", payload: []byte(" \n{\"a\":1}\n"), stored: `{"a":1}`},
		{name: "digits in keys and strings", payload: map[string]string{"1e999999": "-1e999999"}, stored: `{"1e999999":"-1e999999"}`},
		{name: "exactly the default limit", payload: json.RawMessage(atLimit(1 << 20)), stored: atLimit(1 << 20)},
		{name: "exactly a set limit", opts: jobq.Options{MaxPayloadBytes: 18}, payload: json.RawMessage(`{"s":"0123456789"}`), stored: `{"s":"0123456789"}`},
		{name: "a limit above the default", opts: jobq.Options{MaxPayloadBytes: 2 << 20}, payload: json.RawMessage(atLimit(2 << 20)), stored: atLimit(2 << 20)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := jobq.New(tc.opts)
			job := jobq.Job{Kind: "k", Payload: tc.payload}
			if err := c.Validate(job); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			one, err := c.Enqueue(ctx, pool, job)
			if err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			many, err := c.EnqueueMany(ctx, pool, []jobq.Job{job})
			if err != nil {
				t.Fatalf("EnqueueMany: %v", err)
			}
			for _, id := range []int64{one.ID, many[0].ID} {
				var same bool
				if err := pool.QueryRow(ctx, "select payload = $2::jsonb from workq.job_runs_all where id = $1", id, tc.stored).Scan(&same); err != nil {
					t.Fatal(err)
				} else if !same {
					t.Errorf("job %d: payload differs from %.60s", id, tc.stored)
				}
			}
		})
	}
}

func countJobRuns(t *testing.T, db workqtype.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "select count(*) from workq.job_runs_all").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckPayloadAgreesWithPostgres: around each edge of what jsonb
// accepts (numeric's range, surrogate escapes, NUL), workqtype.CheckPayload
// accepts exactly the objects that PostgreSQL's jsonb input accepts.
func TestCheckPayloadAgreesWithPostgres(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	var payloads []string
	for _, mantissa := range []string{"0", "-0", "1", "-7", "10", "0.0", "0.0001", "123.456", "1.0000", "9.99", "0.5", "100.000"} {
		for _, exp := range []int{0, 131067, 131068, 131069, 131070, 131071, 131072, 131075, 131076,
			-16379, -16380, -16381, -16382, -16383, -16384, -16385, 1073741822, 1073741823, -1073741822, -1073741823} {
			payloads = append(payloads, fmt.Sprintf(`{"n":%se%d}`, mantissa, exp), fmt.Sprintf(`{"n":[%sE+%d]}`, mantissa, exp))
		}
	}
	for _, s := range []string{`\u0000`, `\\u0000`, `\\\u0000`, `a\u0000`, `\u0001`, `\ud800`, `\udbff\udfff`, `\ud800\udc00`, `\uDBFF\uDFFF`,
		`\ud800\ud800`, `\udc00\ud800`, `\ud800x`, `\ud800\\udc00`, `\ud7ff`, `\ue000`, `\uffff`, `\\\ud800`, `\"\ud800\udc00\"`} {
		payloads = append(payloads, `{"s":"`+s+`"}`, `{"`+s+`":0}`)
	}
	for _, p := range payloads {
		var pgErr error
		var ok bool
		if err := pool.QueryRow(ctx, "select $1::text::jsonb is not null", p).Scan(&ok); err != nil {
			pgErr = err
		}
		if checkErr := workqtype.CheckPayload([]byte(p), 0); (checkErr == nil) != (pgErr == nil) {
			t.Errorf("%.60s: CheckPayload says %v, PostgreSQL says %v", p, checkErr, pgErr)
		}
	}
}
