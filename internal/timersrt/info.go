package timersrt

import "github.com/workq/workq/internal/lease"

// States a timer is listed in: the lease states (cancelled is a state of
// its own on every work table since migration 00017).
const (
	StateReady      = "ready"
	StateInProgress = "in_progress"
	StateDone       = "done"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
)

// States lists every state, for validation and help texts.
var States = []string{StateReady, StateInProgress, StateDone, StateFailed, StateCancelled}

// stateOf names a row's state: the lease state's name (status 4 is
// cancelled since migration 00017).
func stateOf(status int16) string {
	if lease.Status(status) == lease.StatusCancelled {
		return StateCancelled
	}
	return lease.Status(status).String()
}

// StateOf names the state of a timer row: the lease state's name
// (StateCancelled for status cancelled).
func StateOf(status lease.Status) string { return stateOf(int16(status)) }
