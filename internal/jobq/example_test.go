package jobq_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/workqtype"
)

// CheckPayload is the payload rule of the client, for code that receives
// payloads itself: a JSON object that jsonb can store, within a size limit.
func ExampleCheckPayload() {
	for _, p := range []string{
		`{"to":"ann@example.com"}`,
		`["ann@example.com"]`,
		`{"note":"a\u0000b"}`,
		`{"blob":"` + strings.Repeat("x", 100) + `"}`,
	} {
		fmt.Println(workqtype.CheckPayload([]byte(p), 64))
	}
	// Output:
	// <nil>
	// invalid request: payload must be a JSON object ({...}), got an array
	// invalid request: payload contains \u0000 (NUL), which PostgreSQL's jsonb cannot store
	// invalid request: payload is 111 bytes, more than the limit of 64 bytes
}

// MaxPayloadBytes sets the client's payload limit (0: 1 MiB). Validate
// checks a job without a database.
func ExampleOptions_maxPayloadBytes() {
	client := jobq.New(jobq.Options{MaxPayloadBytes: 4 << 10})
	err := client.Validate(jobq.Job{
		Kind:    "report.build",
		Payload: map[string]string{"csv": strings.Repeat("x", 5000)},
	})
	var tooLarge *workqtype.PayloadTooLargeError
	if errors.As(err, &tooLarge) {
		fmt.Printf("%d bytes, over the limit of %d\n", tooLarge.Size, tooLarge.Limit)
	}
	fmt.Println(errors.Is(err, workqtype.ErrInvalid))
	// Output:
	// 5010 bytes, over the limit of 4096
	// true
}
