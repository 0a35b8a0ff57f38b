package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print every setting with its flag, environment variable and default (Markdown table)",
		Args:  cobra.NoArgs,
		// The settings of the worker, the maintenance and the Client's item
		// defaults are workq.Config's (clientSettings): their defaults
		// are the library's.
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "| flag | environment | default | meaning |")
			fmt.Fprintln(out, "|---|---|---|---|")
			cfg := cliConfig()
			cfg.WorkerID = "<hostname>-<pid>" // the default is computed per process
			for _, o := range cfg.Options(clientBindings(&cfg)) {
				fmt.Fprintf(out, "| `--%s` | `%s` | `%s` | %s |\n", o.Flag, o.Env, o.Default, o.Usage)
			}
			return nil
		},
	}
}
