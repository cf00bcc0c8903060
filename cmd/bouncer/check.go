package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/hybrid"
	"github.com/bouncerhq/bouncer/rules"
	bstore "github.com/bouncerhq/bouncer/store"
)

func checkUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer check [--mode strict|lease|async] [--on-store-error local|allow|deny] [--regions N] CONFIG")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Validates a config file, or every *.yaml file of a directory, as `bouncer serve`")
	fmt.Fprintln(w, "would load it, or a gateway config and its rules file as `bouncer gateway` would,")
	fmt.Fprintln(w, "and prints each problem with file, line and reason. Exits 1 if there is any.")
	fmt.Fprintln(w, "For every limit it prints how far over the limit the instances sharing it")
	fmt.Fprintln(w, "through Redis can admit in its mode (its own, or --mode's as bouncer serve --mode")
	fmt.Fprintln(w, "would give it), and how far while Redis is down, under the limit's on_store_error")
	fmt.Fprintln(w, "(its own, or --on-store-error's, local by default, as bouncer serve).")
	fmt.Fprintln(w, "With --regions N, it also prints how far over each limit N regions admit")
	fmt.Fprintln(w, "together, as bouncer serve gives them with regions (docs/regions.md).")
}

// checkFlags are bouncer check's flags: each takes a value, as
// "--name value" or "--name=value".
type checkFlags struct {
	load    rules.LoadOptions
	policy  bouncer.StoreErrorPolicy
	regions int // --regions: how many regions share the limits; 0 or 1: one
}

// parse reads the flags at the front of args and returns the rest.
func (f *checkFlags) parse(args []string) ([]string, error) {
	f.policy = bouncer.StoreErrorLocal
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		name, v, inline := strings.Cut(strings.TrimPrefix(args[0], "--"), "=")
		if name != "mode" && name != "on-store-error" && name != "regions" {
			break
		}
		args = args[1:]
		if !inline && len(args) > 0 {
			v, args = args[0], args[1:]
		}
		switch name {
		case "mode":
			m, err := bouncer.ParseMode(v)
			if err != nil || v == "" {
				return nil, fmt.Errorf("--mode: want strict, lease or async, got %q", v)
			}
			f.load.Mode = m
		case "on-store-error":
			p, err := bouncer.ParseStoreErrorPolicy(v)
			if err != nil || v == "" {
				return nil, fmt.Errorf("--on-store-error: want local, allow or deny, got %q", v)
			}
			f.policy = p
		case "regions":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return nil, fmt.Errorf("--regions: want 1 to 64, got %q", v)
			}
			f.regions = n
		}
	}
	return args, nil
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	args, err := f.parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\n", err)
		checkUsage(stderr)
		return exitUsage
	}
	lo := f.load
	switch {
	case len(args) > 1:
		fmt.Fprintf(stderr, "bouncer check takes one path, a file or a directory; got %d\n\n", len(args))
		checkUsage(stderr)
		return exitUsage
	case len(args) == 1 && args[0] != "" && args[0][0] == '-':
		fmt.Fprintf(stderr, "bouncer check takes no flag but --mode, --on-store-error and --regions; got %s\n\n", args[0])
		checkUsage(stderr)
		return exitUsage
	case len(args) == 0 || args[0] == "":
		checkUsage(stderr)
		return exitUsage
	}
	if isGatewayConfig(args[0]) {
		return checkGateway(args[0], f, stdout, stderr)
	}
	c, err := lo.Load(args[0])
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	printRules(stdout, c, f)
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

// printModes writes a line for each of r's limits: what its mode
// guarantees, in units, at the hybrid limiter's defaults, and what it
// admits at worst while Redis is down, under its store-error policy (def
// for a limit that names none).
func printModes(w io.Writer, r *rules.Rule, def bouncer.StoreErrorPolicy, regions int) {
	print := func(plan string, ls []bouncer.Limit) {
		for _, l := range ls {
			name := r.Label()
			if plan != "" {
				name += " (plan " + plan + ")"
			}
			money := ""
			if r.Prices != nil {
				money = fmt.Sprintf("; a budget of %s %s a period, counted in millionths", rules.FormatMoney(l.Rate), r.Prices.Currency)
			}
			fmt.Fprintf(w, "  %s:%d: %s, limit %s: %s; %s%s%s\n", r.File, r.Line, name, l.Name, modeBound(l), outageBound(l, def), regionBound(l, regions), money)
		}
	}
	print("", r.Limits)
	for _, p := range slices.Sorted(maps.Keys(r.Plans)) {
		print(p, r.Plans[p].Limits)
	}
}

// limitWords is l's numbers in words: "300 per 2s", and its burst.
func limitWords(l bouncer.Limit) string {
	what := fmt.Sprintf("%d per %v", l.Rate, l.Period)
	if !l.Calendar.IsZero() {
		what = fmt.Sprintf("%d per %v", l.Rate, l.Calendar)
	}
	if l.Algorithm.UsesBurst() {
		what += fmt.Sprintf(" with a burst of %d", l.Burst)
	}
	return what
}

// modeBound says in one sentence how far over l its mode can admit.
func modeBound(l bouncer.Limit) string {
	what := limitWords(l)
	switch l.Mode {
	case bouncer.Strict:
		return "strict: never more than " + what
	case bouncer.Lease:
		if n := hybrid.LeaseBound(l, hybrid.DefaultLeaseTime); n > 0 {
			return fmt.Sprintf("lease: at most %d more than %s (what refills in a lease of %v)", n, what, min(hybrid.DefaultLeaseTime, l.Period))
		}
		return "lease: never more than " + what
	}
	n := hybrid.AsyncBound(l, hybrid.DefaultSyncInterval)
	steady := "1 more a window an instance"
	if l.Algorithm.UsesBurst() {
		steady = fmt.Sprintf("1 more a sync (every %v) an instance", hybrid.DefaultSyncInterval)
	}
	return fmt.Sprintf("async: near the limit, instances share %s by demand: at most %s; a key new to an instance, at most (instances - 1) x %d more (what one instance can admit on its own between syncs)", what, steady, n)
}

// regionBound says in one sentence, after a "; ", what n regions admit
// of l together (nothing for one region).
func regionBound(l bouncer.Limit, n int) string {
	if n <= 1 {
		return ""
	}
	what := limitWords(l)
	if !bstore.Chargeable(l) {
		return fmt.Sprintf("; across %d regions, each region's own (a %s is never global): up to %d x %s in all", n, chargeWord(l), n, what)
	}
	how, inside := "", ""
	if l.Algorithm != bouncer.FixedWindow {
		how = "each region's Redis is charged with the others' admissions, and "
	}
	if l.Mode != bouncer.Async {
		inside = fmt.Sprintf(" (each region's Redis deciding in %s mode, each instance held to its share)", l.Mode)
	}
	return fmt.Sprintf("; across %d regions, global: %snear the limit the regions share %s by demand, as the instances of one do%s; a region cut off keeps its last share, past --region-ttl its static share of %d", n, how, what, inside, l.Rate/int64(n))
}

// outageBound says in one sentence what l admits at worst while its
// shared store cannot answer, under its policy (def when it names none).
func outageBound(l bouncer.Limit, def bouncer.StoreErrorPolicy) string {
	p := l.OnStoreError
	if p == bouncer.StoreErrorDefault {
		p = def
	}
	head := "while Redis is down, with on_store_error " + p.String() + ": "
	switch {
	case p == bouncer.StoreErrorAllow:
		return head + "no limit (every request is allowed)"
	case p == bouncer.StoreErrorDeny && l.Mode == bouncer.Lease:
		return head + "only what the leases already taken hold, within the bound above"
	case p == bouncer.StoreErrorDeny:
		return head + "nothing admitted"
	case l.Mode == bouncer.Lease:
		return head + "up to instances x " + limitWords(l) + ", each instance limiting on its own, plus what the leases already taken hold"
	}
	return head + "up to instances x " + limitWords(l) + ", each instance limiting on its own"
}

// chargeWord names a limit that cannot be charged after the fact, and
// so is never global across regions.
func chargeWord(l bouncer.Limit) string {
	if l.Algorithm == bouncer.Concurrency {
		return "concurrency limit"
	}
	return "shaping leaky bucket"
}
