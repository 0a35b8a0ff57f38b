package metrics

import (
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/maintain"
)

// Maintenance returns the observer to set as maintain.Options.Observer:
// the leader gauge, task rounds, the reap task's counts per queue, the
// stuck task's gauge and the replication task's gauges, under the label
// shard="" (one database). See MaintenanceOf.
func (m *Metrics) Maintenance() maintain.Observer { return m.MaintenanceOf("") }

// MaintenanceOf is Maintenance for the maintenance of one shard of a
// sharded workq (workq.NewShardedClient does this): its gauges carry
// shard=name, so every shard's leader, stuck items and replication state
// is a series of its own. The shard's gauges start at "not leading" and
// "not checked yet" (-1).
func (m *Metrics) MaintenanceOf(shard string) maintain.Observer {
	m.leader.WithLabelValues(shard).Set(0)
	m.standbys.WithLabelValues(shard).Set(-1)
	m.syncStandbys.WithLabelValues(shard).Set(-1)
	return maintainObserver{m: m, shard: shard}
}

type maintainObserver struct {
	maintain.NopObserver
	m     *Metrics
	shard string
}

// stuckKey is one (shard, table) whose stuck gauges a round sets.
type stuckKey struct {
	shard string
	table lease.Table
}

// Replication sets the replication gauges (maintain.ReplicationObserver).
func (o maintainObserver) Replication(standbys, synchronous int) {
	o.m.standbys.WithLabelValues(o.shard).Set(float64(standbys))
	o.m.syncStandbys.WithLabelValues(o.shard).Set(float64(synchronous))
}

func (o maintainObserver) Leading(leading bool) {
	if leading {
		o.m.leader.WithLabelValues(o.shard).Set(1)
	} else {
		o.m.leader.WithLabelValues(o.shard).Set(0)
	}
}

func (o maintainObserver) TaskRound(task string, rows int64, _ time.Duration, err error) {
	o.m.taskRuns.WithLabelValues(task).Inc()
	if err != nil {
		o.m.taskErrors.WithLabelValues(task).Inc()
	}
	if rows > 0 {
		o.m.taskRow.WithLabelValues(task).Add(float64(rows))
	}
}

func (o maintainObserver) Reaped(table lease.Table, r lease.Reaped) {
	for queue, c := range r.ByQueue {
		o.m.addReaped(table, queue, c)
	}
}

// Stuck sets the gauge of every queue the round found, and back to 0 the
// queues of the table an earlier round found and this one did not.
func (o maintainObserver) Stuck(table lease.Table, counts []lease.StuckCount) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stuckKey{shard: o.shard, table: table}
	seen := m.stuckSeen[k]
	if seen == nil {
		seen = map[string]bool{}
		m.stuckSeen[k] = seen
	}
	now := make(map[string]bool, len(counts))
	for _, c := range counts {
		now[c.Queue] = true
		seen[c.Queue] = true
		m.stuck.WithLabelValues(o.shard, string(table), c.Queue).Set(float64(c.Count))
	}
	for q := range seen {
		if !now[q] {
			m.stuck.WithLabelValues(o.shard, string(table), q).Set(0)
		}
	}
}
