package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
)

// itemWaitsFor is what flow control holds a ready item back with
// (Client.WaitsFor), for show; when it cannot be read, show goes on
// without it and says so on stderr.
func itemWaitsFor(cmd *cobra.Command, client *workq.Client, ref workq.ItemRef) []string {
	w, err := client.WaitsFor(cmd.Context(), ref)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "workq: what the item waits for is not shown: %v\n", err)
		return nil
	}
	return w
}
