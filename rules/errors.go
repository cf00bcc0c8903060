package rules

import (
	"errors"

	"github.com/bouncerhq/bouncer/internal/yamlconf"
)

// ErrUnknownDomain is returned by Decide for a domain no config file
// defines, when the engine is set to reject such requests. A request
// Decide cannot decide as given wraps bouncer.ErrInvalidRequest.
var ErrUnknownDomain = errors.New("unknown domain")

// Problem is one thing wrong with a config: where and why.
type Problem = yamlconf.Problem

// ConfigError lists every problem found in a config, in file and line
// order. A config with problems is never served.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string { return yamlconf.Lines("rules: invalid config:", e.Problems) }

type errorList struct{ yamlconf.Problems }

// pos is the line a config value came from (yamlconf.Pos).
type pos = yamlconf.Pos

func (l *errorList) add(file string, line int, reason string) { l.Add(file, line, reason) }

func (l *errorList) err() error {
	if ps := l.Sorted(); ps != nil {
		return &ConfigError{Problems: ps}
	}
	return nil
}
