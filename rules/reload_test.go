package rules_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	limitOne = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	limitTwo = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"
	broken   = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n"
)

type reloads struct {
	mu       sync.Mutex
	attempts int
	changed  int
	failed   int
}

func (r *reloads) on(_ *rules.Config, changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if err != nil {
		r.failed++
	}
	if changed {
		r.changed++
	}
}

func (r *reloads) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed, r.failed
}

func setup(t *testing.T, path string) (*rules.Engine, *rules.Reloader, *reloads) {
	t.Helper()
	c, err := rules.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	var rl reloads
	return e, &rules.Reloader{Path: path, Engine: e, OnReload: rl.on, Debounce: 10 * time.Millisecond}, &rl
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func limitOf(e *rules.Engine) uint32 {
	return e.Config().Domain("d").Rules[0].RequestsPerUnit
}

func TestReloadKeepsOldConfigOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitOne)
	e, r, counts := setup(t, path)
	write(t, path, broken)
	if err := r.Reload(); err == nil {
		t.Fatal("reloading a broken config: got no error")
	}
	if got := limitOf(e); got != 1 {
		t.Fatalf("after a rejected reload: serving limit %d, want the old 1", got)
	}
	write(t, path, limitTwo)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := limitOf(e); got != 2 {
		t.Fatalf("after a valid reload: serving limit %d, want 2", got)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if changed, failed := counts.counts(); changed != 1 || failed != 1 {
		t.Errorf("got %d changes and %d failures, want 1 and 1 (an unchanged reload is no change)", changed, failed)
	}
}

// watch runs r.Watch until the test ends and returns once it watches,
// with the outcomes of its reloads, in order.
func watch(t *testing.T, r *rules.Reloader) <-chan rules.ReloadOutcome {
	t.Helper()
	watching := make(chan struct{})
	r.Watching = func() { close(watching) }
	outcomes := make(chan rules.ReloadOutcome, 1000) // more than a test makes
	r.OnResult = func(res rules.ReloadResult) { outcomes <- res.Outcome }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch has not started after 10s")
	}
	return outcomes
}

// waitFor waits until the watch reports want, passing over other
// outcomes: a write in place can be seen half done (the file emptied)
// when the kernel's events of it come further apart than the debounce.
func waitFor(t *testing.T, outcomes <-chan rules.ReloadOutcome, want rules.ReloadOutcome) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case o := <-outcomes:
			if o == want {
				return
			}
		case <-deadline:
			t.Fatalf("gave up waiting for %q after 10s", want)
		}
	}
}

func TestWatchFileWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitOne)
	e, r, counts := setup(t, path)
	outcomes := watch(t, r)
	write(t, path, broken)
	waitFor(t, outcomes, rules.Rejected)
	if _, failed := counts.counts(); failed < 1 {
		t.Errorf("OnReload saw %d failures after a broken write, want 1 or more", failed)
	}
	if got := limitOf(e); got != 1 {
		t.Fatalf("serving limit %d after a broken write, want the old 1", got)
	}
	write(t, path, limitTwo)
	waitFor(t, outcomes, rules.Reloaded)
	if got := limitOf(e); got != 2 {
		t.Fatalf("serving limit %d after a valid write, want 2", got)
	}
}

// A Kubernetes ConfigMap volume holds timestamped directories, a ..data
// symlink to the current one, and the files as symlinks through ..data;
// an update swaps ..data by renaming a new symlink over it.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "..v1"), 0o755))
	write(t, filepath.Join(dir, "..v1", "c.yaml"), limitOne)
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "c.yaml"), filepath.Join(dir, "c.yaml")))

	e, r, _ := setup(t, filepath.Join(dir, "c.yaml"))
	outcomes := watch(t, r)

	must(os.Mkdir(filepath.Join(dir, "..v2"), 0o755))
	write(t, filepath.Join(dir, "..v2", "c.yaml"), limitTwo)
	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	waitFor(t, outcomes, rules.Reloaded)
	if got := limitOf(e); got != 2 {
		t.Fatalf("serving limit %d after the swap, want 2", got)
	}
}

// Writes to other files next to the config (a log, say) do not reload it:
// with a rejected config, each reload would log, and the log's write would
// reload again.
func TestWatchIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	write(t, path, limitOne)
	_, r, counts := setup(t, path)
	outcomes := watch(t, r)
	// Renamed over, in one event, so that the watch reloads once.
	write(t, path+".new", broken)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, outcomes, rules.Rejected)
	attempts := func() int { counts.mu.Lock(); defer counts.mu.Unlock(); return counts.attempts }
	before := attempts()
	for i := range 5 {
		write(t, filepath.Join(dir, "bouncer.log"), fmt.Sprint("line ", i))
	}
	// The absence of a reload can only be seen by waiting: twenty
	// debounce periods.
	time.Sleep(200 * time.Millisecond)
	if got := attempts(); got != before {
		t.Errorf("got %d reloads after writes to another file, want none", got-before)
	}
}

// Also is the rest of a service's reload: what it changes is a reload
// even when the rules are the same, and its error rejects the attempt
// whole, the rules it came with included.
func TestReloadAlso(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitOne)
	e, r, _ := setup(t, path)
	var (
		seen    []uint32 // the limit the engine served when Also ran
		changed bool
		fail    error
	)
	r.Also = func(c *rules.Config) (bool, error) {
		if c != e.Config() {
			t.Errorf("Also got a config the engine does not serve")
		}
		seen = append(seen, limitOf(e))
		return changed, fail
	}
	for _, step := range []struct {
		name    string
		file    string
		changed bool
		fail    error
		want    rules.ReloadOutcome
		limit   uint32
	}{
		{"nothing changed", limitOne, false, nil, rules.Unchanged, 1},
		{"only the rest changed", limitOne, true, nil, rules.Reloaded, 1},
		{"the rest is rejected with new rules", limitTwo, false, errors.New("bad route"), rules.Rejected, 1},
		{"both fixed", limitTwo, false, nil, rules.Reloaded, 2},
	} {
		write(t, path, step.file)
		changed, fail = step.changed, step.fail
		err := r.Reload()
		if !errors.Is(err, step.fail) {
			t.Errorf("%s: got error %v, want %v", step.name, err, step.fail)
		}
		h := r.History()
		if got := h[len(h)-1].Outcome; got != step.want {
			t.Errorf("%s: got %q, want %q", step.name, got, step.want)
		}
		if got := limitOf(e); got != step.limit {
			t.Errorf("%s: serving limit %d, want %d", step.name, got, step.limit)
		}
	}
	if want := []uint32{1, 1, 2, 2}; !slices.Equal(seen, want) {
		t.Errorf("Also saw the engine serve limits %v, want %v (the new rules, before they are taken)", seen, want)
	}
}

// Without rules (Path ""), a reload is Also's alone, and Watch watches
// AlsoFiles.
func TestReloadAlsoWithoutRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	write(t, file, "one")
	var e rules.Engine
	calls := 0
	r := &rules.Reloader{Engine: &e, AlsoFiles: []string{file}, Debounce: 10 * time.Millisecond,
		Also: func(c *rules.Config) (bool, error) {
			if c != e.Config() {
				t.Errorf("Also got a config the engine does not serve")
			}
			calls++
			return true, nil
		}}
	outcomes := watch(t, r)
	write(t, file, "two")
	waitFor(t, outcomes, rules.Reloaded)
	if calls == 0 {
		t.Error("Also was not called")
	}
}
