package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/config"
)

func newConfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print every setting with its flag, environment variable and default (Markdown table)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "| flag | environment | default | meaning |")
			fmt.Fprintln(out, "|---|---|---|---|")
			for _, o := range config.Options() {
				fmt.Fprintf(out, "| `--%s` | `%s` | `%s` | %s |\n", o.Flag, o.Env, o.Default, o.Usage)
			}
			return nil
		},
	}
}
