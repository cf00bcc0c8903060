package memstore_test

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/storetest"
)

// runSteps runs steps of sc on key in s and fails on a decision other
// than the step's Want.
func runSteps(t *testing.T, s *memstore.Store, clock *storetest.Clock, sc storetest.Scenario, key string, steps []storetest.Step) {
	t.Helper()
	ctx := context.Background()
	for _, st := range steps {
		clock.Set(storetest.Start.Add(st.At))
		r := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{sc.Limit}}}, Cost: st.Cost, Peek: st.Cost == 0}
		switch {
		case st.Refund:
			if err := s.Refund(ctx, r); err != nil {
				t.Fatalf("Refund at %v: %v", st.At, err)
			}
		case st.Charge:
			if err := s.Charge(ctx, r); err != nil {
				t.Fatalf("Charge at %v: %v", st.At, err)
			}
		default:
			d, err := s.Check(ctx, r)
			if err != nil {
				t.Fatalf("Check at %v: %v", st.At, err)
			}
			if got := storetest.WantOf(d); got != st.Want {
				t.Fatalf("key %s, step at %v cost %d: got %v, want %v", key, st.At, st.Cost, got, st.Want)
			}
		}
	}
}

// Every scenario of the conformance tables, cut at every step: the first
// part runs on one store, which is saved; a new store (with another shard
// count) loads the file and must decide the rest as the tables say.
func TestSaveLoadRoundTripEveryScenario(t *testing.T) {
	dir := t.TempDir()
	for _, sc := range storetest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			for cut := 1; cut < len(sc.Steps); cut++ {
				clock := storetest.NewClock(storetest.Start)
				a := memstore.New(memstore.Options{Now: clock.Now, Shards: 4, Persistent: true})
				keys := []string{"a", "b" + strconv.Itoa(cut), "user:42"}
				for _, k := range keys {
					runSteps(t, a, clock, sc, k, sc.Steps[:cut])
				}
				path := filepath.Join(dir, "state")
				if _, err := a.Save(path); err != nil {
					t.Fatal(err)
				}
				b := memstore.New(memstore.Options{Now: clock.Now, Shards: 64, Persistent: true})
				if _, err := b.Load(path); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					runSteps(t, b, clock, sc, k, sc.Steps[cut:])
				}
			}
		})
	}
}

var (
	window = bouncer.Limit{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	short  = bouncer.Limit{Name: "min", Algorithm: bouncer.FixedWindow, Rate: 10, Period: time.Minute}
	bucket = bouncer.Limit{Name: "bucket", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
)

// A restore later in time is exact: a window that ended meanwhile is
// fresh, a bucket has refilled by the time that passed, a long window
// keeps what was spent.
func TestLoadLaterInTime(t *testing.T) {
	clock := &fakeClock{t: start}
	a := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	check(t, a, "k", 30, window)
	check(t, a, "k", 7, short)
	check(t, a, "k", 10, bucket)
	path := filepath.Join(t.TempDir(), "state")
	saved, err := a.Save(path)
	if err != nil {
		t.Fatal(err)
	}
	if saved.States != 3 {
		t.Fatalf("Saved.States = %d, want 3", saved.States)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != saved.Bytes {
		t.Fatalf("file size %v (%v), want Saved.Bytes %d", fi.Size(), err, saved.Bytes)
	}
	clock.t = clock.t.Add(time.Minute + 500*time.Millisecond)
	b := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	ld, err := b.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ld.States != 1 || ld.Fresh != 2 {
		t.Fatalf("Loaded = %+v, want 1 state restored (the day) and 2 fresh", ld)
	}
	for _, c := range []struct {
		l    bouncer.Limit
		want int64
	}{{window, 69}, {short, 9}, {bucket, 9}} {
		if d := check(t, b, "k", 1, c.l); !d.Allowed || d.Remaining != c.want {
			t.Errorf("%s after the restore: %+v, want allowed with %d remaining", c.l.Name, d, c.want)
		}
	}
	// Half a second into the bucket's refill, 5 of 10 are back.
	clock.t = start.Add(500 * time.Millisecond)
	c := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	if _, err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	if d := check(t, c, "k", 1, bucket); !d.Allowed || d.Remaining != 4 {
		t.Errorf("bucket half refilled: %+v, want allowed with 4 remaining", d)
	}
}

// A new field of bouncer.Limit that names its state must be saved too,
// under a new version of the file format.
func TestLimitFieldsSaved(t *testing.T) {
	if n := reflect.TypeOf(bouncer.Limit{}).NumField(); n != 10 {
		t.Fatalf("bouncer.Limit has %d fields, the state file saves 10: save the new ones and bump the format's version", n)
	}
}

func TestLoadRefusesDamagedFiles(t *testing.T) {
	clock := &fakeClock{t: start}
	a := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	for i := range 100 {
		check(t, a, "k"+strconv.Itoa(i), 3, window)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if _, err := a.Save(good); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"flipped byte", edit(func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }), "corrupt: the body's checksum"},
		{"truncated body", data[:len(data)-7], "truncated: the body holds"},
		{"truncated header", data[:10], "truncated: 10 bytes"},
		{"empty", nil, "truncated: 0 bytes"},
		{"bytes after the end", append(append([]byte(nil), data...), 0), "1 bytes past the end"},
		{"wrong version", edit(func(b []byte) []byte { b[8] = 3; return b }), "format version 3, this build reads versions 1 and 2"},
		{"wrong magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "not a memory store state file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			b := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
			_, err := b.Load(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load = %v, want an error naming %s and saying %q", err, path, c.want)
			}
			if n := b.Len(); n != 0 {
				t.Fatalf("after a refused load the store holds %d states, want 0", n)
			}
		})
	}
	_, err = memstore.New(memstore.Options{Persistent: true}).Load(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v, want fs.ErrNotExist", err)
	}
	if _, err := a.Load(good); err == nil || !strings.Contains(err.Error(), "already holds state") {
		t.Fatalf("Load into a store with state = %v, want an error", err)
	}
}

const killEnv = "BOUNCER_MEMSTORE_KILLED_SAVE"

// TestSaveKilledLeavesLastGoodFile kills (SIGKILL) a process in the middle
// of a Save, with the new file written but not yet renamed, and loads the
// file: it is the last good one.
func TestSaveKilledLeavesLastGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	clock := &fakeClock{t: start}
	a := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	check(t, a, "k", 3, window)
	if _, err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaveKilledHelper$")
	cmd.Env = append(os.Environ(), killEnv+"="+path)
	stdin, err := cmd.StdinPipe() // the helper blocks reading it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "written" {
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	tmps, _ := filepath.Glob(path + ".*.tmp")
	if len(tmps) != 1 {
		t.Fatalf("temporary files %v, want the one the killed save wrote", tmps)
	}
	b := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	if _, err := b.Load(path); err != nil {
		t.Fatalf("the last good file after a kill: %v", err)
	}
	if d := check(t, b, "k", 1, window); d.Remaining != 96 {
		t.Fatalf("after the kill, Remaining = %d, want 96 (the last good file's 3 spent, and 1)", d.Remaining)
	}
	if _, err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	if tmps, _ := filepath.Glob(path + ".*.tmp"); len(tmps) != 0 {
		t.Errorf("temporary files %v after the next save, want the killed save's removed", tmps)
	}
}

// TestSaveKilledHelper is the process TestSaveKilledLeavesLastGoodFile
// kills: it saves another state over the file and stops before renaming.
func TestSaveKilledHelper(t *testing.T) {
	path := os.Getenv(killEnv)
	if path == "" {
		t.Skip("run by TestSaveKilledLeavesLastGoodFile")
	}
	s := memstore.New(memstore.Options{Persistent: true})
	for i := range 1000 {
		check(t, s, "k"+strconv.Itoa(i), 50, window)
	}
	memstore.SetTestHookBeforeRename(func() {
		os.Stdout.WriteString("written\n")
		_, _ = os.Stdin.Read(make([]byte, 1)) // until killed
	})
	_, _ = s.Save(path)
	t.Fatal("not killed")
}

// Saves run while checks go on, lock-free (one limit) and locked (two
// limits, new keys); a last save after the checks holds every count.
func TestSaveWhileChecking(t *testing.T) {
	clock := &fakeClock{t: start}
	s := memstore.New(memstore.Options{Now: clock.Now, Shards: 4, Persistent: true})
	path := filepath.Join(t.TempDir(), "state")
	const workers, keys, rounds = 2, 200, 5
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for r := range rounds {
				for k := range keys {
					key := "w" + strconv.Itoa(w) + ":" + strconv.Itoa(k)
					one := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{window}}}, Cost: 1}
					two := bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key + ":" + strconv.Itoa(r), Limits: []bouncer.Limit{window, short}}}, Cost: 1}
					for _, req := range []bouncer.Request{one, two} {
						if d, err := s.Check(context.Background(), req); err != nil || !d.Allowed {
							t.Errorf("check %s: %+v, %v", req.Keys[0].Key, d, err)
						}
					}
				}
			}
		}()
	}
	for range 5 {
		if _, err := s.Save(path); err != nil {
			t.Error(err)
		}
	}
	for range workers {
		<-done
	}
	saved, err := s.Save(path)
	if want := workers * keys * (1 + 2*rounds); err != nil || saved.States != want {
		t.Fatalf("Save = %+v, %v; want %d states", saved, err, want)
	}
	b := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	if _, err := b.Load(path); err != nil {
		t.Fatal(err)
	}
	for w := range workers {
		for k := range keys {
			key := "w" + strconv.Itoa(w) + ":" + strconv.Itoa(k)
			d, err := b.Check(context.Background(), bouncer.Request{Keys: []bouncer.KeyLimits{{Key: key, Limits: []bouncer.Limit{window}}}, Peek: true})
			if err != nil || d.Remaining != 100-rounds {
				t.Fatalf("%s: Remaining %d after the restore, want %d", key, d.Remaining, 100-rounds)
			}
		}
	}
}

// A file of format version 1, written before calendar limits by the
// build before them (testdata/v1.state: alice charged 7 under a 100 a
// day window and a bucket of 10 at 2026-12-01 12:00 UTC), loads into
// this build: a deploy keeps its counts.
func TestLoadVersion1(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	if _, err := s.Load(filepath.Join("testdata", "v1.state")); err != nil {
		t.Fatal(err)
	}
	w := bouncer.Limit{Name: "day", Algorithm: bouncer.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	b := bouncer.Limit{Name: "burst", Algorithm: bouncer.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	if d := check(t, s, "alice", 1, w); d.Remaining != 92 {
		t.Errorf("the day's window after loading: %d remaining, want 92", d.Remaining)
	}
	if d := check(t, s, "alice", 1, b); d.Remaining != 2 {
		t.Errorf("the bucket after loading: %d remaining, want 2", d.Remaining)
	}
}

// Records (store.Records) are saved with the states and restored.
func TestRecordsSaved(t *testing.T) {
	clock := &fakeClock{t: start}
	a := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	ctx := context.Background()
	for k, v := range map[string]string{"limits\x00api:alice": `{"month":100}`, "limits\x00api:bob": ""} {
		if err := a.PutRecord(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.DeleteRecord(ctx, "limits\x00api:bob"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state")
	saved, err := a.Save(path)
	if err != nil || saved.Records != 1 {
		t.Fatalf("Save: %+v, %v; want 1 record", saved, err)
	}
	b := memstore.New(memstore.Options{Now: clock.Now, Persistent: true})
	ld, err := b.Load(path)
	if err != nil || ld.Records != 1 {
		t.Fatalf("Load: %+v, %v; want 1 record", ld, err)
	}
	if v, ok, err := b.GetRecord(ctx, "limits\x00api:alice"); err != nil || !ok || string(v) != `{"month":100}` {
		t.Errorf("alice's record after a restore: %q %v %v", v, ok, err)
	}
	if _, ok, _ := b.GetRecord(ctx, "limits\x00api:bob"); ok {
		t.Error("a deleted record came back")
	}
	if err := b.PutRecord(ctx, "", nil); err == nil {
		t.Error("an empty key was stored")
	}
	if err := b.PutRecord(ctx, "k", make([]byte, 64<<10+1)); err == nil {
		t.Error("a record over 64 KiB was stored")
	}
}
