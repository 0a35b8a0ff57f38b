package workq

import (
	"fmt"

	"github.com/workq/workq/internal/clienthook"
)

// clientAPI is the clienthook.APIFunc of package workq: what package api
// serves of a Client (clienthook.API).
func clientAPI(client any) (clienthook.API, error) {
	c, ok := client.(*Client)
	if !ok || c == nil {
		return clienthook.API{}, fmt.Errorf("workq: %T is not a *workq.Client", client)
	}
	h := clienthook.API{Sharded: c.set != nil, Schema: c.Schema(), MaxPayloadBytes: c.jobs.MaxPayloadBytes(),
		ValidateMessage: c.outbox.Validate, ValidateTimer: c.timers.Validate, ValidateInbox: c.inbox.Validate}
	shards := []*Client{c}
	if c.set != nil {
		shards = c.set.shards
	}
	for _, sc := range shards {
		h.Shards = append(h.Shards, clienthook.APIShard{Name: sc.name, DB: sc.db})
	}
	return h, nil
}
