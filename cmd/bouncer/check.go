package main

import (
	"fmt"
	"io"

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
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		checkUsage(stderr)
		return exitUsage
	}
	c, err := rules.Load(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	for _, d := range c.Domains() {
		fmt.Fprintf(stdout, "domain %s (%s semantics): %d rules, from %s\n", d.Name, d.Semantics, len(d.Rules), d.File)
	}
	fmt.Fprintf(stdout, "ok: config version %s\n", c.Version)
	return exitOK
}
