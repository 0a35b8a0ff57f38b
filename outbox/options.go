package outbox

import "fmt"

// FinalFailure says what a partition key does when its head message fails
// for good (attempts used up, or a permanent error).
type FinalFailure int

const (
	// Block keeps the key's later messages waiting until an operator retries
	// the failed message (`workq outbox retry`): nothing of the key is
	// delivered out of order. The default.
	Block FinalFailure = iota
	// Skip lets the key's next message go; the failed message stays failed
	// (and can still be retried, then out of order).
	Skip
)

func (f FinalFailure) String() string {
	switch f {
	case Block:
		return "block"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("FinalFailure(%d)", int(f))
}

// TopicOptions are a topic's relay options, given when its handler is
// registered (workq.HandleOutbox).
//
// Every process relaying a queue should be configured alike:
// OnFinalFailure travels with each claim, so a relay that does not know a
// topic's Skip treats its failed messages as blocking.
type TopicOptions struct {
	OnFinalFailure FinalFailure // Block (default) or Skip
}

// RelayOptions configure the outbox relay of a workq.Client
// (workq.Config.Relay).
type RelayOptions struct {
	// HandOverAfter is how many messages of one partition key the relay
	// delivers in a row, while it finds no other key free, before it
	// offers the key to the other relays of the queue: its claims pass the
	// key over and wake the queue's relays, until its second claim that
	// was woken too (docs/outbox.md). Default DefaultHandOverAfter;
	// negative: never.
	HandOverAfter int
}

// DefaultHandOverAfter is RelayOptions.HandOverAfter's default.
const DefaultHandOverAfter = 16
