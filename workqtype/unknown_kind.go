package workqtype

import "errors"

// ErrUnknownKind is matched (errors.Is) by the error of an enqueue that a
// Client with job workers refuses because no worker of its own works the
// job's kind (workq.ErrUnknownKind; Config.SkipUnknownKindCheck allows
// it). That error matches ErrInvalid too: nothing was written.
var ErrUnknownKind = errors.New("unknown job kind")
