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
	fmt.Println("synchronous_commit:", cfg.ConnConfig.RuntimeParams["synchronous_commit"])
	fmt.Println("checks the primary:", cfg.ConnConfig.ValidateConnect != nil)
	fmt.Println("max lifetime:", cfg.MaxConnLifetime)
	// pool, err := pgxpool.NewWithConfig(ctx, cfg)
	// Output:
	// synchronous_commit: on
	// checks the primary: true
	// max lifetime: 30m0s
}
