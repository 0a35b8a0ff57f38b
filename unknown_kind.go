package workq

import (
	"fmt"

	"github.com/workq/workq/workqtype"
)

// ErrUnknownKind is matched (errors.Is) by the error of an enqueue of a
// job kind that the Client has no worker for (River's
// UnknownJobKindError). A Client with job workers (AddWorker, HandleJob)
// refuses such a job in Enqueue, EnqueueTx, EnqueueMany(Tx) and
// EnqueueManyFast(Tx), and ValidateArgs reports it: the error names the
// kind (and, in a batch, the job's index), matches ErrInvalid too, and
// nothing of the batch is written. Without the check a job nobody works
// would be claimed by this Client's workers and retried until it fails.
//
// A Client without job workers (a producer, or one that only handles
// outbox, inbox or timer topics) enqueues any kind, and so does one with
// Config.SkipUnknownKindCheck (a service that enqueues kinds other
// services work, in queues it does not work). Outbox topics, inbox
// sources and topics and timer topics are never checked: they are
// addressed to handlers anywhere (a relay's publishers, other services,
// default handlers), not to this Client's workers.
var ErrUnknownKind = workqtype.ErrUnknownKind

// kindSet is the job kinds a Client works, when it refuses others (nil:
// it enqueues any kind).
type kindSet map[string]struct{}

// newKindSet returns the job kinds of cfg.Workers, or nil when cfg has
// none or skips the check.
func newKindSet(cfg Config) kindSet {
	if cfg.SkipUnknownKindCheck || cfg.Workers == nil || len(cfg.Workers.jobs) == 0 {
		return nil
	}
	ks := make(kindSet, len(cfg.Workers.jobs))
	for k := range cfg.Workers.jobs {
		ks[k] = struct{}{}
	}
	return ks
}

// check refuses kind when ks is a set without it: one map lookup.
func (ks kindSet) check(kind string) error {
	if ks == nil {
		return nil
	}
	if _, ok := ks[kind]; ok {
		return nil
	}
	return &workqtype.ValidationError{Field: "kind", Err: ErrUnknownKind,
		Msg: fmt.Sprintf("kind %q has no worker in this Client (%v): add its worker, or set Config.SkipUnknownKindCheck", kind, ErrUnknownKind)}
}
