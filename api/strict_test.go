package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestStrictJSON(t *testing.T) {
	job := reflect.TypeFor[*jobRequest]()
	jobs := reflect.TypeFor[*batch[jobRequest]]()
	cases := []struct {
		name      string
		typ       reflect.Type
		body      string
		wantField string // "" with wantMsg "": accepted
		wantMsg   string
	}{
		{"plain", job, `{"kind":"k","payload":{"a":[1,-2.5e3,true,false,null,"s",{},[]]}}`, "", ""},
		{"spaces everywhere", job, " \t\r\n{ \"kind\" : \"k\" , \"payload\" : { \"a\" : [ 1 , { \"b\" : null } ] } }\n", "", ""},
		{"escaped name is the name", job, `{"k\u0069nd":"k"}`, "", ""},
		{"escaped name given twice", job, `{"kind":"a","k\u0069nd":"b"}`, "kind", "given twice"},
		{"escapes in strings", job, `{"kind":"k","payload":{"q":"a\"b\\","t":"\\ud800","u":"\/\b\f\n\r\t"}}`, "", ""},
		{"surrogate pair", job, `{"kind":"k","payload":{"e":"x\ud83d\ude00y"}}`, "", ""},
		{"same name in sibling objects", job, `{"kind":"k","payload":{"a":{"x":1},"b":{"x":1}}}`, "", ""},
		{"same name in array elements", jobs, `{"items":[{"kind":"a"},{"kind":"b"}]}`, "", ""},
		{"empty name twice", job, `{"kind":"k","payload":{"":1,"":2}}`, "payload.", "given twice"},
		{"deep path", jobs, `{"items":[{"kind":"k"},{"kind":"k","payload":{"a":[0,{"b":[{"c":"\udc00"}]}]}}]}`, "items[1].payload.a[1].b[0].c", "without its first half"},
		{"surrogate at the very end", job, `{"kind":"k","dedup_key":"\ud800"}`, "dedup_key", "without its second half"},
		{"high then escaped backslash", job, `{"kind":"k","dedup_key":"\ud800\\udc00"}`, "dedup_key", "second half"},
		{"two highs", job, `{"kind":"k","dedup_key":"\ud800\ud800"}`, "dedup_key", "second half"},
		{"upper-case hex pair", job, `{"kind":"k","dedup_key":"\uD83D\uDE00"}`, "", ""},
		{"overlong UTF-8", job, "{\"kind\":\"k\",\"dedup_key\":\"\xc0\x80\"}", "dedup_key", "not valid UTF-8"},
		{"UTF-8 surrogate", job, "{\"kind\":\"k\",\"dedup_key\":\"\xed\xb0\x80\"}", "dedup_key", "not valid UTF-8"},
		{"case of a nested struct field", reflect.TypeFor[*matchingRequest](), `{"filter":{"QUEUE":"q"}}`, "filter.QUEUE", `did you mean "queue"`},
		{"any case in a map", reflect.TypeFor[*outboxRequest](), `{"topic":"t","headers":{"A":"1","a":"2"}}`, "", ""},
		{"twice in a map", reflect.TypeFor[*outboxRequest](), `{"topic":"t","headers":{"a":"1","a":"2"}}`, "headers.a", "given twice"},
		{"unknown field", job, `{"kind":"k","colour":"red"}`, "colour", "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !json.Valid([]byte(c.body)) {
				t.Fatalf("the case's body is not JSON: %s", c.body)
			}
			err := strictJSON([]byte(c.body), c.typ)
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Field != c.wantField || !strings.Contains(e.Message, c.wantMsg) || e.Code != CodeInvalid {
				t.Fatalf("got %#v, want field %q and %q", err, c.wantField, c.wantMsg)
			}
		})
	}
}
