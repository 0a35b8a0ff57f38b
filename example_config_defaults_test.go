package workq_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq"
)

// DefaultConfig is what a zero Config means; Validate checks a Config
// without a database, naming each bad field.
func ExampleDefaultConfig() {
	d := workq.DefaultConfig()
	fmt.Println("max workers per queue:", d.MaxWorkers)
	fmt.Println("lease:", d.LeaseTTL)
	fmt.Println("max attempts:", d.MaxAttempts)

	err := workq.Config{LeaseTTL: 10 * time.Millisecond, MaxWorkers: 20000}.Validate()
	fmt.Println(errors.Is(err, workq.ErrInvalid))
	var ve *workq.ValidationError
	if errors.As(err, &ve) {
		fmt.Println("first bad field:", ve.Field)
	}
	// Output:
	// max workers per queue: 100
	// lease: 30s
	// max attempts: 4
	// true
	// first bad field: MaxWorkers
}
