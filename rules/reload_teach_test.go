package rules_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// TestReloadResults steps a reloader through a config's edits and asserts
// what each attempt reports: its outcome, the version served, and the
// problems one per entry.
func TestReloadResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitOne)
	e, r, _ := setup(t, path)
	var got []rules.ReloadResult
	r.OnResult = func(res rules.ReloadResult) { got = append(got, res) }
	one := e.Config().Version
	twoProblems := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n  - key: k\n"
	steps := []struct {
		name     string
		write    string // "" writes nothing
		outcome  rules.ReloadOutcome
		message  string
		problems []string
	}{
		{"nothing changed", "", rules.Unchanged, "config unchanged", nil},
		{"broken", twoProblems, rules.Rejected, "config rejected; the old one keeps serving", []string{
			path + ":4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; want second, minute, hour, day, week, month or year",
			path + ":5: duplicate descriptor composite key 'd.k'",
		}},
		{"still broken", twoProblems, rules.Rejected, "config rejected; the old one keeps serving", []string{
			path + ":4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; want second, minute, hour, day, week, month or year",
			path + ":5: duplicate descriptor composite key 'd.k'",
		}},
		{"fixed back to the served config", limitOne, rules.Restored, "config fixed: the one served is current again", nil},
		{"unchanged after the fix", "", rules.Unchanged, "config unchanged", nil},
		{"changed", limitTwo, rules.Reloaded, "config reloaded", nil},
	}
	for i, s := range steps {
		if s.write != "" {
			write(t, path, s.write)
		}
		err := r.Reload()
		if len(got) != i+1 {
			t.Fatalf("%s: got %d results, want %d", s.name, len(got), i+1)
		}
		res := got[i]
		if res.Outcome != s.outcome || res.Outcome.String() != s.message {
			t.Errorf("%s: got %v (%q), want %v (%q)", s.name, res.Outcome, res.Outcome.String(), s.outcome, s.message)
		}
		if res.Err != err {
			t.Errorf("%s: Err: got %v, want %v", s.name, res.Err, err)
		}
		var problems []string
		for _, p := range res.Problems {
			problems = append(problems, p.String())
		}
		if !slices.Equal(problems, s.problems) {
			t.Errorf("%s: problems: got %q, want %q", s.name, problems, s.problems)
		}
		want := one
		if s.outcome == rules.Reloaded {
			want = e.Config().Version
		}
		if res.Config.Version != want || e.Config().Version != want {
			t.Errorf("%s: served version: got %s (engine %s), want %s", s.name, res.Config.Version, e.Config().Version, want)
		}
	}
	if limitOf(e) != 2 {
		t.Errorf("limit: got %d, want 2", limitOf(e))
	}
}

// History remembers the last 20 attempts, oldest first, each at the time
// of the reloader's clock, with what report gives OnResult.
func TestReloadHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitOne)
	e, r, _ := setup(t, path)
	clock := storetest.NewClock(storetest.Start)
	r.Now = clock.Now
	if h := r.History(); len(h) != 0 {
		t.Fatalf("before any attempt: got %d records, want none", len(h))
	}
	for range 21 {
		clock.Advance(time.Second)
		_ = r.Reload()
	}
	write(t, path, "domain: [\n")
	clock.Advance(time.Second)
	_ = r.Reload()
	h := r.History()
	if len(h) != 20 {
		t.Fatalf("got %d records, want the last 20", len(h))
	}
	if got := h[0].Time.Sub(storetest.Start); got != 3*time.Second {
		t.Errorf("oldest record: at %v, want 3s (the first two forgotten)", got)
	}
	last := h[19]
	if last.Outcome != rules.Rejected || last.Version != e.Config().Version || len(last.Problems) != 1 || last.Time.Sub(storetest.Start) != 22*time.Second {
		t.Errorf("newest record: got %+v, want the rejected attempt at 22s, with one problem, the old version serving", last)
	}
	if h[0].Outcome != rules.Unchanged {
		t.Errorf("oldest record: got %v, want unchanged", h[0].Outcome)
	}
}
