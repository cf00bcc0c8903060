package rules

import (
	"errors"
	"fmt"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
	"slices"
	"strings"
)

var (
	// ErrInvalidRequest is wrapped by every error Decide returns for a
	// request it cannot decide as given: a transport answers it with
	// INVALID_ARGUMENT or 400.
	ErrInvalidRequest = errors.New("invalid request")

	// ErrUnknownDomain is returned by Decide for a domain no config file
	// defines, when the engine is set to reject such requests.
	ErrUnknownDomain = errors.New("unknown domain")
)

// Problem is one thing wrong with a config: where and why.
type Problem struct {
	File   string
	Line   int // 0 when the problem is not on one line
	Reason string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Reason)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Reason)
}

// ConfigError lists every problem found in a config, in file and line
// order. A config with problems is never served.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "rules: invalid config:\n" + strings.Join(lines, "\n")
}

type errorList struct{ problems []Problem }

// pos is the line a config value came from (yamlconf.Pos).
type pos = yamlconf.Pos

func (l *errorList) add(file string, line int, reason string) {
	l.problems = append(l.problems, Problem{File: file, Line: line, Reason: reason})
}

func (l *errorList) err() error {
	if len(l.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(l.problems, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return &ConfigError{Problems: l.problems}
}
