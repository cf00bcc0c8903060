package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/rules"
)

func checkUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer check [--mode strict|lease|async] CONFIG")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Validates a config file, or every *.yaml file of a directory, as `bouncer serve`")
	fmt.Fprintln(w, "would load it, and prints each problem with file, line and reason. Exits 1 if")
	fmt.Fprintln(w, "there is any. For every limit in lease or async mode (its own, or --mode's as")
	fmt.Fprintln(w, "bouncer serve --mode would give it), prints how far over the limit the instances")
	fmt.Fprintln(w, "sharing it through Redis can admit.")
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	var lo rules.LoadOptions
	if len(args) > 0 && (args[0] == "--mode" || strings.HasPrefix(args[0], "--mode=")) {
		v, rest := strings.TrimPrefix(strings.TrimPrefix(args[0], "--mode"), "="), args[1:]
		if args[0] == "--mode" && len(rest) > 0 {
			v, rest = rest[0], rest[1:]
		}
		m, err := bouncer.ParseMode(v)
		if err != nil || v == "" {
			fmt.Fprintf(stderr, "--mode: want strict, lease or async, got %q\n\n", v)
			checkUsage(stderr)
			return exitUsage
		}
		lo.Mode, args = m, rest
	}
	switch {
	case len(args) > 1:
		fmt.Fprintf(stderr, "bouncer check takes one path, a file or a directory; got %d\n\n", len(args))
		checkUsage(stderr)
		return exitUsage
	case len(args) == 1 && args[0] != "" && args[0][0] == '-':
		fmt.Fprintf(stderr, "bouncer check takes no flag but --mode; got %s\n\n", args[0])
		checkUsage(stderr)
		return exitUsage
	case len(args) == 0 || args[0] == "":
		checkUsage(stderr)
		return exitUsage
	}
	c, err := lo.Load(args[0])
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	for _, d := range c.Domains() {
		fmt.Fprintf(stdout, "domain %s (%s semantics): %d rules, from %s\n", d.Name, d.Semantics, len(d.Rules), d.File)
		for _, r := range d.Rules {
			printModes(stdout, r)
		}
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

// printModes writes a line for each of r's limits in lease or async mode:
// what the mode guarantees, in units, at the hybrid limiter's defaults.
func printModes(w io.Writer, r *rules.Rule) {
	print := func(plan string, ls []bouncer.Limit) {
		for _, l := range ls {
			if l.Mode == bouncer.Strict {
				continue
			}
			name := r.Label()
			if plan != "" {
				name += " (plan " + plan + ")"
			}
			fmt.Fprintf(w, "  %s:%d: %s, limit %s: %s\n", r.File, r.Line, name, l.Name, modeBound(l))
		}
	}
	print("", r.Limits)
	for _, p := range slices.Sorted(maps.Keys(r.Plans)) {
		print(p, r.Plans[p].Limits)
	}
}

// modeBound says in one sentence how far over l its mode can admit.
func modeBound(l bouncer.Limit) string {
	what := fmt.Sprintf("%d per %v", l.Rate, l.Period)
	if l.Algorithm.UsesBurst() {
		what += fmt.Sprintf(" with a burst of %d", l.Burst)
	}
	if l.Mode == bouncer.Lease {
		if n := hybrid.LeaseBound(l, hybrid.DefaultLeaseTime); n > 0 {
			return fmt.Sprintf("lease: at most %d more than %s (what refills in a lease of %v)", n, what, min(hybrid.DefaultLeaseTime, l.Period))
		}
		return "lease: never more than " + what
	}
	n := hybrid.AsyncBound(l, hybrid.DefaultSyncInterval)
	return fmt.Sprintf("async: at most (instances - 1) x %d more than %s (what one instance can admit between syncs, every %v)", n, what, hybrid.DefaultSyncInterval)
}
