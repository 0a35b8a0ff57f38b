package jobq

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workq/workq/workqtype"
)

// Unique makes a job unique: while a run with the same key is in one of
// States, enqueuing another returns that run (Enqueued.Duplicate) instead.
// The key is the kind, and as asked the queue, the args and the period.
// The zero value is not unique.
type Unique struct {
	ByArgs   bool          // the payload is part of the key (as JSON values: key order and spacing do not count)
	ByPeriod time.Duration // at least 1s: the period of the job's run time is part of the key (once per period)
	ByQueue  bool          // the queue is part of the key
	// States are the states in which a run holds its key (StateReady...).
	// Empty: DefaultUniqueStates. They must include ready and in_progress:
	// a run that entered them from a state outside would break the rule.
	States []string
}

// Job states, as the admin API, the CLI and Unique.States name them.
const (
	StateReady      = workqtype.StateReady
	StateInProgress = workqtype.StateInProgress
	StateDone       = workqtype.StateDone
	StateFailed     = workqtype.StateFailed
	StateCancelled  = workqtype.StateCancelled
)

// stateBits are the statuses (job_runs.status) of the states a unique job
// may name: bit n of job_runs.unique_states is status n.
var stateBits = map[string]int16{
	StateReady: 1 << 0, StateInProgress: 1 << 1, StateDone: 1 << 2, StateFailed: 1 << 3, StateCancelled: 1 << 4,
}

// DefaultUniqueStates are Unique.States when it is empty: every state but
// failed and cancelled (River's default), so a job done within its period
// still counts, while one that failed or was cancelled can be enqueued
// again.
var DefaultUniqueStates = []string{StateReady, StateInProgress, StateDone}

// MinUniquePeriod is the shortest Unique.ByPeriod.
const MinUniquePeriod = time.Second

// IsZero reports whether u asks for nothing: the job is not unique.
func (u Unique) IsZero() bool {
	return !u.ByArgs && u.ByPeriod == 0 && !u.ByQueue && len(u.States) == 0
}

// key checks u and returns p's unique key (a SHA-256 digest) and states
// mask. now is the client's clock: the period is that of the job's run
// time, RunAt or now + Delay, in whole periods since the Unix epoch.
func (u Unique) key(p *prepared, now time.Time) ([]byte, int16, error) {
	if u.ByPeriod != 0 && u.ByPeriod < MinUniquePeriod {
		return nil, 0, workqtype.Invalid("unique.by_period", fmt.Sprintf("unique period %s is shorter than %s", u.ByPeriod, MinUniquePeriod))
	}
	states := u.States
	if len(states) == 0 {
		states = DefaultUniqueStates
	}
	var mask int16
	for _, s := range states {
		bit, ok := stateBits[s]
		if !ok {
			return nil, 0, workqtype.Invalid("unique.by_states", fmt.Sprintf("unknown state %q (want some of %s)", s, strings.Join(stateNames(), ", ")))
		}
		mask |= bit
	}
	if need := stateBits[StateReady] | stateBits[StateInProgress]; mask&need != need {
		return nil, 0, workqtype.Invalid("unique.by_states", "unique states must include ready and in_progress")
	}
	var b bytes.Buffer
	b.WriteString("workq unique v1\x00kind=")
	b.WriteString(p.kind)
	if u.ByQueue {
		b.WriteString("\x00queue=")
		b.WriteString(p.queue)
	}
	if u.ByArgs {
		canon, err := canonicalJSON(p.payload)
		if err != nil {
			return nil, 0, workqtype.InvalidErr("payload", err)
		}
		b.WriteString("\x00args=")
		b.Write(canon)
	}
	if u.ByPeriod != 0 {
		at := now.Add(time.Duration(p.delayMs) * time.Millisecond)
		if p.runAt != nil {
			at = *p.runAt
		}
		period := u.ByPeriod.Milliseconds()
		ms := at.UnixMilli()
		start := ms - ((ms%period)+period)%period // floor, also before 1970
		b.WriteString("\x00period=")
		b.WriteString(strconv.FormatInt(period, 10))
		b.WriteString("@")
		b.WriteString(strconv.FormatInt(start, 10))
	}
	sum := sha256.Sum256(b.Bytes())
	return sum[:], mask, nil
}

func stateNames() []string {
	names := make([]string, 0, len(stateBits))
	for s := range stateBits {
		names = append(names, s)
	}
	slices.SortFunc(names, func(a, b string) int { return int(stateBits[a] - stateBits[b]) })
	return names
}

// canonicalJSON re-encodes a JSON value with object keys sorted and no
// spacing; numbers keep their text.
func canonicalJSON(raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return json.Marshal(v)
}

// RouteKey returns the key that places j on a shard of a sharded client
// ("" for a job without a key, placed anywhere): its dedup key, or for a
// unique job its unique key without the period (every period of a key goes
// to one shard, so a period's edge between routing and insert cannot split
// a key), else its limit key (every job of a limit key on one shard, so
// that the key's per-key limits count all of them). Two jobs that can
// collide on a key have the same route key.
func (c *Client) RouteKey(j Job) (string, error) {
	p, err := c.prepare(j)
	if err != nil {
		return "", err
	}
	switch {
	case p.dedup != "":
		return workqtype.ShardKeyDedup(p.dedup), nil
	case p.uniqueKey != nil:
		u := j.Unique
		u.ByPeriod = 0
		if u.IsZero() {
			u.States = DefaultUniqueStates
		}
		k, _, err := u.key(&p, time.Time{})
		if err != nil {
			return "", err
		}
		return "unique\x00" + string(k), nil
	case p.limitKey != "":
		return workqtype.ShardKeyLimit(p.limitKey), nil
	}
	return "", nil
}
