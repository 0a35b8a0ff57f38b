package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Usage errors, the same for every command: an unknown command or
// subcommand, a missing or extra argument, a flag value that does not parse.
// Each is one line that names what is wrong and exits 1 (main).

// finishTree makes every command of root report usage errors the same way:
// a command that only groups subcommands (workq, workq jobs) rejects an
// unknown one instead of printing its help and exiting 0; a missing or
// extra positional argument is named; a flag value that does not parse
// names the flag and what it takes.
func finishTree(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(_ *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			switch {
			case err != nil:
				return err
			case len(rest) > 0:
				return groupRun(target, rest)
			}
			return target.Help()
		},
	})
	// Cobra adds these when the root runs; added now, they are walked too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && c.Run == nil && c.RunE == nil:
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRun
		case c.Args != nil:
			c.Args = namedArgs(c.Args)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// groupRun runs a command that only groups subcommands: its help without
// arguments, an error for anything else.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	what := "subcommand"
	if !cmd.HasParent() {
		what = "command"
	}
	msg := fmt.Sprintf("unknown %s %q", what, args[0])
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return fmt.Errorf("%s; run '%s --help' for the list", msg, cmd.CommandPath())
}

// namedArgs wraps a positional-argument check so that its error names the
// missing argument (from the command's usage line) or the extra one.
func namedArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil {
			return nil
		}
		usage := strings.TrimSuffix(cmd.UseLine(), " [flags]")
		names := argNames(cmd.Use)
		variadic := len(names) > 0 && strings.HasSuffix(names[len(names)-1], "...")
		switch {
		case len(args) < len(names):
			return fmt.Errorf("missing %s (usage: %s)", names[len(args)], usage)
		case len(args) == 0:
			return fmt.Errorf("missing argument (usage: %s)", usage)
		case len(names) == 0 && check(cmd, nil) == nil, len(names) > 0 && len(args) > len(names) && !variadic:
			return fmt.Errorf("unexpected argument %q (usage: %s)", args[len(names)], usage)
		}
		return fmt.Errorf("%w (usage: %s)", err, usage)
	}
}

// argNames returns the positional arguments a usage line names: the words
// in capitals after the command's name (TABLE QUEUE, ID..., ID|MESSAGE-ID),
// up to the first that is not one.
func argNames(use string) []string {
	var names []string
	for _, w := range strings.Fields(use)[1:] {
		if strings.ContainsAny(w[:1], "[-(") || w != strings.ToUpper(w) {
			break
		}
		names = append(names, w)
	}
	return names
}

// flagError rewrites pflag's error for a value that does not parse, which
// shows Go's strconv or time error, into one that names the flag and what
// it takes; other flag errors get a pointer to the command's help.
func flagError(cmd *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		f := bad.GetFlag()
		if want := flagTakes(f.Value.Type()); want != "" {
			return fmt.Errorf("--%s %q: want %s", f.Name, bad.GetValue(), want)
		}
	}
	return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
}

// flagTakes says what a flag of a pflag value type accepts ("" for a type
// whose own error says enough).
func flagTakes(typ string) string {
	whole := func(lo, hi any) string { return fmt.Sprintf("a whole number from %v to %v", lo, hi) }
	switch typ {
	case "int8":
		return whole(math.MinInt8, math.MaxInt8)
	case "int16":
		return whole(math.MinInt16, math.MaxInt16)
	case "int32":
		return whole(math.MinInt32, math.MaxInt32)
	case "int", "int64":
		return whole(math.MinInt64, strconv.FormatInt(math.MaxInt64, 10))
	case "uint8":
		return whole(0, math.MaxUint8)
	case "uint16":
		return whole(0, math.MaxUint16)
	case "uint32":
		return whole(0, uint64(math.MaxUint32))
	case "uint", "uint64":
		return whole(0, strconv.FormatUint(math.MaxUint64, 10))
	case "float32", "float64":
		return "a number"
	case "duration":
		return "a duration such as 500ms, 30s, 5m or 1h30m"
	case "bool":
		return "true or false"
	}
	return ""
}
