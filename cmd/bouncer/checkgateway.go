package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/rules"
)

// gatewayField and domainField find, at the start of a line, a top-level
// field that only a gateway config has, and a rules file's domain.
var (
	gatewayField = regexp.MustCompile(`(?m)^(listeners|routes|auth|admin|trusted_proxies|forwarded_header)[ \t]*:`)
	domainField  = regexp.MustCompile(`(?m)^domain[ \t]*:`)
)

// isGatewayConfig reports whether path is a file whose top level reads
// as a gateway config's (`bouncer gateway --config`): one of its fields
// in block style, and no domain. Any other file goes to the rules
// loader, which says what is wrong with it.
func isGatewayConfig(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Size() > gateway.MaxFileSize {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return gatewayField.Match(data) && !domainField.Match(data)
}

// checkGateway validates the gateway config at path as `bouncer gateway`
// loads it: the file, the rules file it names (with what the gateway
// allows: concurrency limits), and the gateway built from both (routes,
// authentication, upstreams), without listening. It prints what
// runCheck prints of the rules, and the problems found.
func checkGateway(path string, f checkFlags, stdout, stderr io.Writer) int {
	cfg, err := gateway.Load(path)
	if err != nil {
		printGatewayError(stderr, path, err)
		return exitFail
	}
	var engine *rules.Engine
	version := "none (no route is limited)"
	if cfg.Rules != "" {
		lo := f.load
		lo.AllowConcurrency = true
		rc, err := lo.Load(cfg.Rules)
		if err != nil {
			printConfigError(stderr, err)
			return exitFail
		}
		engine, version = rules.NewEngine(rc, nil), rc.Version
		printRules(stdout, rc, f)
	}
	g, err := gateway.New(cfg, gateway.Options{Engine: engine, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		printGatewayError(stderr, path, err)
		return exitFail
	}
	g.Close()
	fmt.Fprintf(stdout, "ok: gateway config %s: %d listeners, %d routes; rules version %s\n", path, len(cfg.Listeners), len(cfg.Routes), version)
	return exitOK
}

// printGatewayError writes one line per problem of a gateway config, as
// printConfigError does for rules.
func printGatewayError(w io.Writer, path string, err error) {
	printConfigError(w, gatewayProblems(path, err))
}

// printRules writes each domain of c and the bounds of its rules' limits.
func printRules(w io.Writer, c *rules.Config, f checkFlags) {
	for _, d := range c.Domains() {
		fmt.Fprintf(w, "domain %s (%s semantics): %d rules, from %s\n", d.Name, d.Semantics, len(d.Rules), d.File)
		for _, r := range d.Rules {
			printModes(w, r, f.policy, f.regions)
		}
	}
}
