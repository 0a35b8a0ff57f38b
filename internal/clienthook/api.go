package clienthook

import (
	"errors"
	"sync/atomic"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// API is what package api (the HTTP API and its dashboard) takes from the
// workq.Client it serves: the Client's databases in its schema, its
// schedule store and its checks. Everything comes from the Client, so the
// API has no database, schema or limit settings of its own. The Client's
// methods do every enqueue (and decide the shard); these handles serve the
// reads and operator writes the Client has no method for yet.
type API struct {
	// Shards are the Client's databases, in its order, each a DB in the
	// Client's schema. A Client of NewClient has one, named
	// workq.DefaultShard; Sharded is false then, and for a
	// NewShardedClient of one shard.
	Shards  []APIShard
	Sharded bool
	// Schema is the Client's schema.
	Schema string
	// MaxPayloadBytes is the Client's payload limit, with its default.
	MaxPayloadBytes int
	// ValidateMessage, ValidateTimer and ValidateInbox check an item as
	// the Client's Send, ScheduleTimer and Receive check it (an error
	// wrapping workqtype.ErrInvalid), touching no database: the API checks
	// every item of a batch before the Client writes any.
	ValidateMessage func(outbox.Message) error
	ValidateTimer   func(timers.Timer) error
	ValidateInbox   func(inbox.Message) error
}

// APIShard is one database of a Client.
type APIShard struct {
	Name string
	DB   workqtype.TxDB // in the Client's schema
}

// APIFunc returns the API handles of client (a *workq.Client).
type APIFunc func(client any) (API, error)

var apiFunc atomic.Pointer[APIFunc]

// RegisterAPI sets the APIFunc; the first one registered stays (there is
// only one: the root package's, registered by workq.NewClient).
func RegisterAPI(f APIFunc) { apiFunc.CompareAndSwap(nil, &f) }

// APIOf calls the registered APIFunc.
func APIOf(client any) (API, error) {
	f := apiFunc.Load()
	if f == nil {
		return API{}, errors.New("clienthook: no workq.Client was made by workq.NewClient or workq.NewShardedClient")
	}
	return (*f)(client)
}
