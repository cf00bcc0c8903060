package redisstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// The store's Lua is one Redis function library (Redis 7 and later),
// composed from the files of lua/: the call's clock, the algorithms (one file each, each the twin of its Go definition in
// package algo), how states are stored, and one function per operation
// (check, refund, reset, the exchange of async shares, and a sync: checks and an exchange in one call). A library is loaded once per node, so a call
// (FCALL) runs only the function, where a script sent with EVALSHA would
// define the whole library again on every call (docs/redis.md measures
// what that costs). Every key a function touches is among
// its KEYS; the library's shebang line makes Redis hold its functions to
// its cross-slot rule on a Cluster.

//go:embed lua/*.lua
var luaFiles embed.FS

// luaLibrary is the library's code, in order, before its entry points.
var luaLibrary = []string{
	"time.lua", "algo.lua",
	"tokenbucket.lua", "gcra.lua", "leakybucket.lua", "fixedwindow.lua",
	"slidingwindowcounter.lua", "slidingwindowlog.lua", "concurrency.lua",
	"log.lua", "store.lua",
}

// luaEntries are the entry points, and register.lua names them.
var luaEntries = []string{"check.lua", "refund.lua", "reset.lua", "shares.lua", "sync.lua"}

func luaSource(name string) string {
	src, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("redisstore: " + err.Error())
	}
	return string(src)
}

// library is the function library the store loads and calls.
type library struct {
	source                             string // for FUNCTION LOAD
	check, refund, reset, shares, sync string // its functions' names
}

// newLibrary composes the library, with call (call.lua, or a test's
// stand-in) defining KEYS, ARGV and R.
func newLibrary(call string) *library {
	var b strings.Builder
	b.WriteString(call)
	for _, f := range append(append([]string(nil), luaLibrary...), luaEntries...) {
		b.WriteString("\n-- " + f + "\n")
		b.WriteString(luaSource(f))
	}
	body := b.String()
	sum := sha256.Sum256([]byte(body))
	version := hex.EncodeToString(sum[:6])
	body += "\n" + strings.ReplaceAll(luaSource("register.lua"), "@VERSION@", version)
	return &library{
		source: "#!lua name=bouncer_" + version + "\n" + body,
		check:  "bouncer_check_" + version,
		refund: "bouncer_refund_" + version,
		reset:  "bouncer_reset_" + version,
		shares: "bouncer_shares_" + version,
		sync:   "bouncer_sync_" + version,
	}
}

// defaultLibrary is the library the store runs.
var defaultLibrary = newLibrary(luaSource("call.lua"))

// load loads lib on every node c knows (within ctx), leaving alone a node
// that has it already; a replica refuses (it gets it from its master). It
// returns what else went wrong, such as a server older than Redis 7,
// which has no functions.
func (lib *library) load(ctx context.Context, c rueidis.Client) error {
	var errs []error
	for addr, n := range c.Nodes() {
		err := n.Do(ctx, n.B().FunctionLoad().FunctionCode(lib.source).Build()).Error()
		if e, ok := rueidis.IsRedisErr(err); ok && (strings.Contains(e.Error(), "already exists") || strings.HasPrefix(e.Error(), "READONLY")) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// fcall calls the function fn with keys and args.
func fcall(ctx context.Context, c rueidis.Client, fn string, keys, args []string) rueidis.RedisResult {
	return c.Do(ctx, fcallCmd(c, fn, keys, args))
}

// fcallCmd is the command that calls the function fn with keys and args.
func fcallCmd(c rueidis.Client, fn string, keys, args []string) rueidis.Completed {
	return c.B().Fcall().Function(fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// missingFunction reports whether r says the node has not got the
// library (a node restarted, or added, since the store loaded it).
func missingFunction(r rueidis.RedisResult) bool {
	e, ok := rueidis.IsRedisErr(r.Error())
	return ok && strings.Contains(e.Error(), "Function not found")
}

// composeEval returns a script for EVAL of the library's code before its
// entry points, then entry, run with the script's KEYS and ARGV and the
// call's clock read: for the tests' harnesses.
func composeEval(call, entry string) string {
	var b strings.Builder
	b.WriteString("#!lua\nlocal EVALKEYS, EVALARGV = KEYS, ARGV\n")
	b.WriteString(call)
	for _, f := range luaLibrary {
		b.WriteString("\n-- " + f + "\n")
		b.WriteString(luaSource(f))
	}
	b.WriteString("\nenter(EVALKEYS, EVALARGV)\nT.init()\n")
	b.WriteString(entry)
	return b.String()
}
