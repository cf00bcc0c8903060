package rules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bouncerhq/bouncer/internal/filewatch"
)

// Reloader loads the config at Path into Engine again when asked to, and
// whenever the files change if Watch runs. A config that fails to load is
// rejected and the engine keeps serving the one it has.
type Reloader struct {
	// Path is the config, a file or a directory; "" when the service has
	// no rules (then only Also reloads, and the engine keeps its config).
	Path   string
	Engine *Engine

	// Also, if not nil, is the rest of a reload, for a service that
	// serves more than the rules from files of its own (the gateway: its
	// routes and auth, whose limits name the rules' domains). Reload
	// calls it on every attempt whose rules load and validate, once the
	// engine serves them; it builds and serves the rest, and reports
	// whether that changed. Its error rejects the attempt whole: the
	// engine serves its previous config again. A *ConfigError's problems
	// are reported one by one; another error is one problem of Path.
	Also func(*Config) (changed bool, err error)

	// AlsoFiles are the files Also reads, which Watch watches too.
	AlsoFiles []string

	// Options are what the config may hold beyond what the service can
	// serve (LoadOptions); the zero value is the service's.
	Options LoadOptions

	// OnReload, if not nil, is called after every attempt with the config
	// now served and the error that rejected the new one (nil when it was
	// taken, or when nothing had changed: changed reports which).
	OnReload func(c *Config, changed bool, err error)

	// OnResult, if not nil, is called after every attempt, after
	// OnReload, with what the attempt did: for a logger, which can say
	// when a config is unchanged, when a fixed config is the served one
	// again, and print each problem of a rejected one on its own.
	OnResult func(ReloadResult)

	// Validate, if not nil, is asked about every config that loads; an
	// error rejects it as a load error would.
	Validate func(*Config) error

	// Debounce is how long Watch waits after a change for more before it
	// reloads, so that a write in several steps, or a ConfigMap's swap,
	// is read once and whole. 0 means 100ms.
	Debounce time.Duration

	// Now, if not nil, is the clock History reads; nil is time.Now.
	Now func() time.Time

	// Watching, if not nil, is called once by Watch when it watches the
	// files: every change made after it returns is seen. Tests wait for
	// it instead of for a time.
	Watching func()

	mu       sync.Mutex
	rejected bool // the last attempt was rejected

	hmu     sync.Mutex
	history []ReloadRecord // the last reloadHistory attempts, oldest first
}

// reloadHistory is how many attempts History remembers.
const reloadHistory = 20

// ReloadRecord is one reload attempt, as History remembers it.
type ReloadRecord struct {
	Time     time.Time
	Outcome  ReloadOutcome
	Version  string    // the config served after the attempt
	Problems []Problem // why it was rejected, one per mistake
}

// History returns the last 20 reload attempts, oldest first.
func (r *Reloader) History() []ReloadRecord {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return slices.Clone(r.history)
}

// ReloadResult is what one reload attempt did.
type ReloadResult struct {
	Outcome ReloadOutcome
	Config  *Config // the config served after the attempt
	Err     error   // what rejected the new config, or nil

	// Problems are Err's, one per mistake, each with its file and line
	// (a *ConfigError's Problems; else one, naming Path).
	Problems []Problem
}

// ReloadOutcome says what a reload attempt did.
type ReloadOutcome uint8

const (
	// Reloaded: the files changed and are served now.
	Reloaded ReloadOutcome = iota
	// Unchanged: the files are the config served; nothing was done.
	Unchanged
	// Restored: after rejected attempts, the files are back to the
	// config served, which is current again.
	Restored
	// Rejected: the files do not load (or Validate refused them); the
	// served config keeps serving.
	Rejected
	// WatchFailed: watching the files failed; Err says how.
	WatchFailed
)

// String is a sentence for a log line: "config reloaded".
func (o ReloadOutcome) String() string {
	switch o {
	case Reloaded:
		return "config reloaded"
	case Unchanged:
		return "config unchanged"
	case Restored:
		return "config fixed: the one served is current again"
	case Rejected:
		return "config rejected; the old one keeps serving"
	case WatchFailed:
		return "watching the config failed"
	}
	return fmt.Sprintf("ReloadOutcome(%d)", uint8(o))
}

func (r *Reloader) report(c *Config, o ReloadOutcome, err error) {
	res := ReloadResult{Outcome: o, Config: c, Err: err}
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		res.Problems = ce.Problems
	} else if err != nil {
		res.Problems = []Problem{{File: r.Path, Reason: strings.TrimPrefix(err.Error(), "rules: ")}}
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	r.hmu.Lock()
	if len(r.history) == reloadHistory {
		r.history = slices.Delete(r.history, 0, 1)
	}
	r.history = append(r.history, ReloadRecord{Time: now(), Outcome: o, Version: c.Version, Problems: res.Problems})
	r.hmu.Unlock()
	if r.OnReload != nil {
		r.OnReload(c, o == Reloaded, err)
	}
	if r.OnResult != nil {
		r.OnResult(res)
	}
}

// Reload loads the config and serves it if it is valid and differs from
// the one served, then runs Also. It returns the error that rejected the
// attempt.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.Engine.Config()
	c, err := r.load(cur)
	changed := err == nil && c.Version != cur.Version
	if changed {
		r.Engine.Swap(c)
	} else if err == nil {
		c = cur // the same config: Also sees the one served
	}
	if err == nil && r.Also != nil {
		also, aerr := r.Also(c)
		switch {
		case aerr != nil && changed:
			r.Engine.Swap(cur)
			changed = false
		case aerr == nil:
			changed = changed || also
		}
		err = aerr
	}
	var o ReloadOutcome
	switch {
	case err != nil:
		o = Rejected
	case changed:
		cur, o = c, Reloaded
	case r.rejected:
		o = Restored
	default:
		o = Unchanged
	}
	r.rejected = err != nil
	r.report(cur, o, err)
	return err
}

// load reads and validates the config at Path; without one, the config
// served (cur) is the one to serve.
func (r *Reloader) load(cur *Config) (*Config, error) {
	if r.Path == "" {
		return cur, nil
	}
	c, err := r.Options.Load(r.Path)
	if err == nil && r.Validate != nil {
		err = r.Validate(c)
	}
	return c, err
}

// Watch reloads after every change to Path or AlsoFiles until ctx is
// done. It watches the directories that hold them (and Path itself when
// it is a directory), so that a file replaced by rename, and a Kubernetes
// ConfigMap's symlink swap, are seen as well as writes in place.
func (r *Reloader) Watch(ctx context.Context) error {
	files := slices.Clone(r.AlsoFiles)
	var dirs map[string]func(string) bool
	if st, err := os.Stat(r.Path); err == nil && st.IsDir() {
		dirs = map[string]func(string) bool{r.Path: IsConfigFile}
	} else {
		files = append(files, r.Path) // filewatch skips ""
	}
	w, err := filewatch.New(files, dirs)
	if err != nil {
		return err
	}
	defer w.Close()
	if r.Watching != nil {
		r.Watching()
	}
	wait := r.Debounce
	if wait <= 0 {
		wait = 100 * time.Millisecond
	}
	w.Run(ctx.Done(), wait, func() { _ = r.Reload() }, func(err error) bool { // reported through OnReload
		r.report(r.Engine.Config(), WatchFailed, err)
		return false
	})
	return nil
}

// IsConfigFile reports whether a file of a config directory, by its base
// name, is read as part of the config: *.yaml and *.yml.
func IsConfigFile(base string) bool {
	return strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")
}
