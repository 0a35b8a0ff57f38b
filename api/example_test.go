package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/testdb"
)

// A program embeds the API of its workq.Client in its own HTTP server: it
// makes a token (normally once, with `workq api token`, keeping only the
// entry in its configuration), enqueues a job run with it (through the
// Client: its enqueue middleware runs) and pauses the queue.
func Example() {
	ctx := context.Background()
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	secret, entry, err := api.NewToken("ops", api.ScopeAdmin)
	if err != nil {
		fmt.Println(err)
		return
	}
	tokens, err := api.ParseTokens([]string{entry}) // entry is NAME:SCOPE:SHA256-HEX
	if err != nil {
		fmt.Println(err)
		return
	}
	// A producer Client: it enqueues, and leaves the maintenance to the
	// workers' processes. Its schema, shards and limits are the API's.
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := api.New(client, api.Options{Tokens: tokens})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/", srv) // or under a prefix with http.StripPrefix
	web := httptest.NewServer(mux)
	defer web.Close()

	call := func(method, path, body string) {
		req, _ := http.NewRequest(method, web.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Println(res.StatusCode, strings.TrimSpace(string(b)))
	}
	call("POST", "/v1/jobs", `{"queue":"mail","kind":"email.send","payload":{"to":"a@example.com"}}`)
	call("POST", "/v1/jobs", `{"queue":"mail","kind":"email.send","delay":"soon"}`)
	call("POST", "/v1/queues/job_runs/mail/pause", `{"reason":"deploy"}`)
	// Output:
	// 201 {"id":1,"duplicate":false}
	// 400 {"error":"delay: \"soon\" is not a duration: want a Go duration string such as \"30s\", \"5m\" or \"1h30m\"","code":"invalid","field":"delay"}
	// 200 {"table":"job_runs","queue":"mail","paused":true,"changed":true}
}
