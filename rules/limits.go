package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bouncerhq/bouncer/internal/yamlconf"

	"github.com/bouncerhq/bouncer"
)

// algorithm rejects the algorithms a rule cannot use: a concurrency limit
// needs a release at the end of every request, which neither RLS nor the
// JSON API has; a caller that releases (Response.Ledger) allows it.
func (o LoadOptions) algorithm(a bouncer.Algorithm) error {
	if a == bouncer.Concurrency && !o.AllowConcurrency {
		return errors.New("concurrency limits need a release when each request ends, which the service cannot be told; use them through the library (Limiter.Refund)")
	}
	return nil
}

// algorithmProblem says why name is not an algorithm a rule may use, in
// the config's words and with the valid names, or "".
func algorithmProblem(name string, o LoadOptions) string {
	a, err := bouncer.ParseAlgorithm(name)
	if err == nil {
		if err := o.algorithm(a); err != nil {
			return err.Error()
		}
		return ""
	}
	var valid []string
	for _, a := range bouncer.Algorithms() {
		if o.algorithm(a) == nil {
			valid = append(valid, a.String())
		}
	}
	reason := fmt.Sprintf("unknown algorithm %q", name)
	if s := yamlconf.Suggest(name, valid); s != "" {
		reason += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return reason + "; want one of " + strings.Join(valid, ", ")
}

// limitReason is a bouncer.Limit's validation error in the config's
// words: "rate: must be at least 1, got 0", without the library's
// prefix and the limit's generated name.
func limitReason(err error) string {
	if le, ok := errors.AsType[*bouncer.LimitError](err); ok {
		return le.Field + ": " + le.Reason
	}
	return err.Error()
}
