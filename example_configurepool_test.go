package workq_test

import (
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
)

// ConfigurePool, between parsing the URL and creating the pool, makes
// every session commit synchronously and keeps the pool off a standby.
func ExampleConfigurePool() {
	cfg, err := pgxpool.ParseConfig("postgres://app@pg1:5432,pg2:5432/app?synchronous_commit=off")
	if err != nil {
		log.Fatal(err)
	}
	workq.ConfigurePool(cfg)
	fmt.Println("sets synchronous_commit on each new connection:", cfg.AfterConnect != nil)
	fmt.Println("checks the primary:", cfg.ConnConfig.ValidateConnect != nil)
	fmt.Println("max lifetime:", cfg.MaxConnLifetime)
	// Then: pool, err := pgxpool.NewWithConfig(ctx, cfg)

	// Output:
	// sets synchronous_commit on each new connection: true
	// checks the primary: true
	// max lifetime: 30m0s
}
