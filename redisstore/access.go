package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/redis/rueidis"
)

// The Redis user a store connects as needs the commands and the keys that
// docs/redis.md lists under "Managed Redis" (an ACL user made with its
// line has them). A store that lacks one finds out when it connects, and
// says which permission is missing and how to grant it, rather than
// failing every check with a bare NOPERM.

// permissionMsg is the message of the line that logs a refusal.
const permissionMsg = "redis: the store's user lacks a permission: deciding by each limit's on_store_error policy"

// accessDoc is where the docs list the permissions a store needs.
const accessDoc = "docs/redis.md#managed-redis"

// setup loads the library on every node c knows, then calls it once (a
// check of nothing, which reads Redis's TIME, with one key of the store's
// prefix declared) and PINGs, as every store does, and logs what failed.
// It returns why the store cannot decide in Redis (a permission the user
// lacks, a server without functions), or nil; a node down or slow now is
// no reason (a call loads the library on a node that misses it).
func (s *Store) setup(ctx context.Context, c rueidis.Client) error {
	loadErr := s.lib.load(ctx, c)
	callErr := fcall(ctx, c, s.lib.check, []string{s.prefix + ":access"}, []string{"", "0", "0"}).Error()
	if callErr == nil {
		callErr = c.Do(ctx, c.B().Ping().Build()).Error()
	}
	loadRefused, callRefused := s.refused(loadErr), s.refused(callErr)
	switch {
	case loadRefused != nil && callErr == nil:
		s.log.Warn("redis: the store's user cannot load the function library: the one another client loaded serves meanwhile, but a node restarted or added will not have it", "err", loadRefused)
		return nil
	case loadRefused != nil && missingFunction(rueidis.NewErrorResult(callErr)):
		callRefused = nil // it is the load's refusal that left it missing
	case isRedisErr(loadErr) && isRedisErr(callErr) && loadRefused == nil && callRefused == nil:
		err := fmt.Errorf("redisstore: loading the function library failed (the store needs Redis 7 or later, or Valkey 7.2 or later, with functions allowed; see %s): %w", accessDoc, loadErr)
		s.log.Error("redis: loading the function library failed: deciding by each limit's on_store_error policy", "err", err)
		return err
	case loadErr != nil && loadRefused == nil:
		s.log.Warn("redis: loading the function library failed on some nodes (they get it when a call finds it missing)", "err", loadErr)
	}
	err := errors.Join(loadRefused, callRefused)
	if err != nil {
		s.log.Error(permissionMsg, "err", err)
	}
	return err
}

func isRedisErr(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re)
}

// refusedCommand finds the command of a NOPERM reply: "NOPERM this user
// has no permissions to run the 'function|load' command".
var refusedCommand = regexp.MustCompile(`'([a-z_|-]+)' command`)

// refused returns, when err is Redis refusing the store's user a command
// or a key, an error that names what to grant; nil otherwise.
func (s *Store) refused(err error) error {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return nil
	}
	msg := re.Error()
	var what, grant string
	switch m := refusedCommand.FindStringSubmatch(msg); {
	case strings.HasPrefix(msg, "NOPERM") && m != nil:
		what, grant = strings.ToUpper(strings.ReplaceAll(m[1], "|", " ")), "+"+m[1]
	case strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, "key"):
		what, grant = "use the keys "+s.prefix+":*", "~"+globEscape(s.prefix)+":*"
	case strings.HasPrefix(msg, "NOPERM"), strings.Contains(msg, "can't run this command"):
		what, grant = "run every command the function library calls", "every command of the ACL line"
	default:
		return nil
	}
	return &accessError{fmt.Sprintf("redisstore: the Redis user cannot %s (NOPERM): grant %s, see %s", what, grant, accessDoc), re}
}

// accessError is a refusal, and what to grant.
type accessError struct {
	msg string
	err error
}

func (e *accessError) Error() string { return e.msg }
func (e *accessError) Unwrap() error { return e.err }

// globEscape escapes what an ACL key pattern reads as a glob.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}
