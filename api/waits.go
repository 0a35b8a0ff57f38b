package api

import (
	"context"

	"github.com/workq/workq"
)

// opWaitsFor is what flow control holds a ready item back with
// (Client.WaitsFor) for the item's waits_for; when it cannot be read the
// item is served without it and the failure logged.
func (s *Server) opWaitsFor(ctx context.Context, sh dbShard, t workq.Table, id int64) []string {
	c, err := s.shardClient(sh)
	if err == nil {
		var w []string
		if w, err = c.WaitsFor(ctx, workq.ItemRef{Table: t, ID: id}); err == nil {
			return w
		}
	}
	s.log.WarnContext(ctx, "api: what the item waits for is not shown", "table", t, "id", id, "shard", sh.Name, "err", err)
	return nil
}
