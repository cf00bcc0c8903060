// Command bouncer runs Bouncer's tools. Each subcommand has its own flags:
//
//	bouncer serve --config PATH [flags]     serve Envoy RLS v3 (gRPC), the JSON API and the admin API
//	bouncer gateway --config FILE [flags]   serve the API gateway: routes, authentication, limits
//	bouncer check [--mode M] CONFIG         validate a config without serving it
//	bouncer simulate [flags]                run algorithms over a traffic pattern on a virtual clock
//	bouncer version                         print the version, commit and Go version built with
//	bouncer help [command]                  print usage
//
// Exit codes: 0 on success, 1 when a command fails, 2 on a usage error.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	_ "time/tzdata" // calendar limits' time zones, also in an image without a zone database

	"github.com/bouncerhq/bouncer/internal/simulate"
)

func main() {
	os.Exit(run(argsOf(os.Args), os.Stdout, os.Stderr))
}

// argsOf is the command line run takes from argv, the process's: run
// as ratelimit (envoyproxy/ratelimit's binary's name, which the image
// links to this one, so that that project's manifests run it), the
// binary is bouncer serve, which reads that project's environment
// (docs/deploy.md).
func argsOf(argv []string) []string {
	if len(argv) > 0 && filepath.Base(argv[0]) == "ratelimit" {
		return append([]string{"serve"}, argv[1:]...)
	}
	return argv[1:]
}

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	// run parses args (which exclude the command's name) and returns the
	// process exit code.
	run func(args []string, stdout, stderr io.Writer) int
	// usage writes the command's full help.
	usage func(w io.Writer)
}

// commands lists the subcommands in the order help prints them.
var commands = []command{
	{
		name:    "serve",
		summary: "serve the rate limit service: Envoy RLS gRPC, JSON API, admin",
		run:     runServe,
		usage:   serveUsage,
	},
	{
		name:    "gateway",
		summary: "serve the API gateway: routes, authentication, limits, REST to gRPC",
		run:     runGateway,
		usage:   gatewayUsage,
	},
	{
		name:    "check",
		summary: "validate a config file or directory without serving it",
		run:     runCheck,
		usage:   checkUsage,
	},
	{
		name:    "simulate",
		summary: "run rate-limit algorithms over a traffic pattern on a virtual clock",
		run:     runSimulate,
		usage:   simulate.Usage,
	},
	{
		name:    "version",
		summary: "print the version, commit and Go version the binary was built with",
		run:     runVersion,
		usage:   versionUsage,
	},
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// run dispatches args (without the program name) to a subcommand and
// returns the exit code. It is main without the process around it, so
// tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "bouncer: no command given")
		usage(stderr)
		return exitUsage
	}
	switch name := args[0]; {
	case name == "help" || isHelpFlag(name):
		return help(args[1:], stdout, stderr)
	default:
		c, ok := lookup(name)
		if !ok {
			fmt.Fprintf(stderr, "bouncer: unknown command %q\n", name)
			usage(stderr)
			return exitUsage
		}
		if slices.ContainsFunc(args[1:], isHelpFlag) {
			// Asked for, help is the command's output, not a usage
			// error: on stdout, exit 0.
			c.usage(stdout)
			return exitOK
		}
		return c.run(args[1:], stdout, stderr)
	}
}

// help prints the usage of the binary, or of the command named in args.
func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "bouncer help: unknown command %q\n", args[0])
			usage(stderr)
			return exitUsage
		}
		c.usage(stdout)
		return exitOK
	}
	fmt.Fprintln(stderr, "bouncer help: at most one command name")
	return exitUsage
}

// isHelpFlag reports whether arg asks for help as the flag package
// reads it: -h, -help, --h or --help, with or without a value.
func isHelpFlag(arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	name, _, _ = strings.Cut(name, "=")
	return name == "h" || name == "help"
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: bouncer <command> [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\tprint this help, or a command's: bouncer help <command>\n")
	tw.Flush()
}
