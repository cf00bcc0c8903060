package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bouncerhq/bouncer/rules"
)

func checkUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer check CONFIG")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Validates a config file, or every *.yaml file of a directory, as `bouncer serve`")
	fmt.Fprintln(w, "would load it, and prints each problem with file, line and reason. Exits 1 if")
	fmt.Fprintln(w, "there is any.")
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 1:
		fmt.Fprintf(stderr, "bouncer check takes one path, a file or a directory; got %d\n\n", len(args))
		checkUsage(stderr)
		return exitUsage
	case len(args) == 1 && args[0] != "" && args[0][0] == '-':
		fmt.Fprintf(stderr, "bouncer check takes no flags; got %s\n\n", args[0])
		checkUsage(stderr)
		return exitUsage
	case len(args) == 0 || args[0] == "":
		checkUsage(stderr)
		return exitUsage
	}
	c, err := rules.Load(args[0])
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	for _, d := range c.Domains() {
		fmt.Fprintf(stdout, "domain %s (%s semantics): %d rules, from %s\n", d.Name, d.Semantics, len(d.Rules), d.File)
	}
	fmt.Fprintf(stdout, "ok: config version %s\n", c.Version)
	return exitOK
}

// printConfigError writes one line per problem of a config, file:line:
// reason, in the user's words: without the package's prefix, which names
// Bouncer's code rather than the config.
func printConfigError(w io.Writer, err error) {
	if ce, ok := errors.AsType[*rules.ConfigError](err); ok {
		for _, p := range ce.Problems {
			fmt.Fprintln(w, p)
		}
		return
	}
	fmt.Fprintln(w, strings.TrimPrefix(err.Error(), "rules: "))
}
