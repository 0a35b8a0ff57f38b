package workq

import "github.com/workq/workq/internal/maintain"

// MaintenanceOf returns the maintenance service of c (nil when disabled;
// a sharded Client's first shard's), for the tests of package workq_test.
func MaintenanceOf(c *Client) *maintain.Service {
	if c.set != nil {
		return c.set.shards[0].maint
	}
	return c.maint
}
