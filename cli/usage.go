package cli

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agents-fleet/fleet/internal/suggest"
)

// A usage error (exit 2) says what was wrong and shows the command's usage
// line, the same way for every command: an unknown flag with the closest
// known one, a value of the wrong kind for a flag, a missing argument.
//
//	fleet run: unknown flag --worker (did you mean --workers?)
//	usage: fleet run [PROMPT] [flags]

// exitUsage is the exit code of a usage error: a bad or missing flag or
// argument, refused before anything is sent.
const exitUsage = 2

// usageErr is a usage error that does not show a usage line.
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// commandUsageErr is a usage error of cmd.
func commandUsageErr(cmd *cobra.Command, format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...), cmd: cmd}
}

// flagUsageErr makes cobra's flag parsing errors usage errors that name
// the flag, what it wants, and the closest known flag.
func flagUsageErr(cmd *cobra.Command, err error) error {
	var (
		notExist *pflag.NotExistError
		invalid  *pflag.InvalidValueError
		missing  *pflag.ValueRequiredError
	)
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() == "":
		name := notExist.GetSpecifiedName()
		if near := suggest.Closest(name, flagNames(cmd)); near != "" {
			return commandUsageErr(cmd, "unknown flag --%s (did you mean --%s?)", name, near)
		}
		return commandUsageErr(cmd, "unknown flag --%s (%s --help lists the flags)", name, cmd.CommandPath())
	case errors.As(err, &invalid):
		return commandUsageErr(cmd, "--%s wants %s, got %q", invalid.GetFlag().Name, wants(invalid.GetFlag().Value.Type()), invalid.GetValue())
	case errors.As(err, &missing):
		f := missing.GetFlag()
		return commandUsageErr(cmd, "--%s wants %s", f.Name, wants(f.Value.Type()))
	}
	return commandUsageErr(cmd, "%v", err)
}

// wants says what a flag of pflag type typ takes.
func wants(typ string) string {
	switch typ {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a number"
	case "float32", "float64":
		return "a number"
	case "duration":
		return "a duration such as 30s, 5m or 1h30m"
	case "bool":
		return "true or false"
	case "stringSlice", "stringArray":
		return "a value (repeat the flag, or separate values with commas)"
	}
	return "a value"
}

// flagNames are the flags cmd takes, hidden ones left out.
func flagNames(cmd *cobra.Command) []string {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	slices.Sort(names)
	return names
}

// bracketed matches the optional parts of a Use line.
var bracketed = regexp.MustCompile(`\[[^\]]*\]`)

// argsWithUsage makes every argument error of cmd and its subcommands a
// usage error with the command's usage line; a missing argument is named
// from the Use line ("send [FLEET] TEXT" without arguments: missing TEXT).
func argsWithUsage(cmd *cobra.Command) {
	if cmd.HasParent() && cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		// A group (fleet worktrees): alone it shows its help; a word that
		// is none of its commands is a usage error, not its help and 0.
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownCommandErr(c, args[0])
		}
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			if err == nil {
				return nil
			}
			if ee, ok := err.(*exitError); ok {
				if ee.cmd != nil {
					return err
				}
				return commandUsageErr(c, "%v", ee.err) // the command's own words
			}
			required := strings.Fields(bracketed.ReplaceAllString(c.Use, ""))[1:]
			if len(args) < len(required) {
				return commandUsageErr(c, "missing %s", strings.Join(required[len(args):], " "))
			}
			return commandUsageErr(c, "%v", err)
		}
	}
	cmd.SetFlagErrorFunc(flagUsageErr)
	for _, sub := range cmd.Commands() {
		argsWithUsage(sub)
	}
}

// unknownCommandErr is the usage error for name, a subcommand parent
// (fleet, or a group of it) does not have, with the closest one.
func unknownCommandErr(parent *cobra.Command, name string) error {
	var names []string
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
			names = append(names, c.Aliases...)
		}
	}
	if near := suggest.Closest(name, names); near != "" {
		return commandUsageErr(parent, "unknown command %q (did you mean %q?)", name, near)
	}
	return commandUsageErr(parent, "unknown command %q (%s --help lists the commands)", name, parent.CommandPath())
}
