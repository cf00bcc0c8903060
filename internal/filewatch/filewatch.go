// Package filewatch tells when config files change: the rules, the
// gateway's config and the TLS certificates are watched alike.
//
// It watches the directories that hold the files, not the files: a file
// renamed over, or a symlink swapped, is a new inode that a watch on the
// old one would never report. Only the events of the files themselves
// count (a log written next to a config must not reload it forever),
// and those of Kubernetes' ..-prefixed entries: a ConfigMap volume's
// files are symlinks through ..data to a timestamped directory, and an
// update renames a new ..data over it.
package filewatch

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher watches files and directories.
type Watcher struct {
	fs    *fsnotify.Watcher
	files map[string]map[string]bool        // directory → base names of the files in it
	dirs  map[string]func(base string) bool // watched directory → which of its entries count
}

// New watches files ("" entries are skipped) and, for each directory of
// dirs, the entries of it that keep accepts (by base name).
func New(files []string, dirs map[string]func(base string) bool) (*Watcher, error) {
	w := &Watcher{files: map[string]map[string]bool{}, dirs: dirs}
	for _, f := range files {
		if f == "" {
			continue
		}
		dir := filepath.Dir(f)
		if w.files[dir] == nil {
			w.files[dir] = map[string]bool{}
		}
		w.files[dir][filepath.Base(f)] = true
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w.fs = fw
	add := func(dir string) error {
		if err := fw.Add(dir); err != nil {
			fw.Close()
			return err
		}
		return nil
	}
	for dir := range w.files {
		if err := add(dir); err != nil {
			return nil, err
		}
	}
	for dir := range dirs {
		if _, done := w.files[dir]; !done {
			if err := add(dir); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// Relevant reports whether an event on name can change a watched file.
func (w *Watcher) Relevant(name string) bool {
	base, dir := filepath.Base(name), filepath.Dir(name)
	k8s := strings.HasPrefix(base, "..")
	if in, ok := w.files[dir]; ok && (in[base] || k8s) {
		return true
	}
	keep, ok := w.dirs[dir]
	return ok && (k8s || keep(base))
}

// Run calls change once the relevant events of a burst have paused for
// wait, until stop is closed. An error of the watch goes to failed, which
// reports whether to call change anyway (events may have been lost).
func (w *Watcher) Run(stop <-chan struct{}, wait time.Duration, change func(), failed func(error) bool) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.Relevant(ev.Name) {
				timer.Reset(wait)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			if failed(err) {
				timer.Reset(wait)
			}
		case <-timer.C:
			change()
		}
	}
}

// Close stops the watch.
func (w *Watcher) Close() error { return w.fs.Close() }
