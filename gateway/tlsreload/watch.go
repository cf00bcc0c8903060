package tlsreload

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watch watches the directories that hold files, not the files: a file
// renamed over, or a symlink swapped, is a new inode that a watch on the
// old one would never report. relevant tells the events that can change
// what the files hold from those of other files in the same directories
// (a log written next to the certificate must not reload it forever).
func watch(files ...string) (*fsnotify.Watcher, func(name string) bool, error) {
	names := map[string]map[string]bool{} // directory → base names in it
	for _, f := range files {
		if f == "" {
			continue
		}
		dir := filepath.Dir(f)
		if names[dir] == nil {
			names[dir] = map[string]bool{}
		}
		names[dir][filepath.Base(f)] = true
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, fileError("watching", "the files", err)
	}
	for dir := range names {
		if err := w.Add(dir); err != nil {
			w.Close()
			return nil, nil, fileError("watching directory", dir, err)
		}
	}
	relevant := func(name string) bool {
		base := filepath.Base(name)
		in, ok := names[filepath.Dir(name)]
		// A Kubernetes volume's files are symlinks through ..data to a
		// timestamped directory; an update renames a new ..data over it.
		return ok && (in[base] || strings.HasPrefix(base, ".."))
	}
	return w, relevant, nil
}

// run reloads once events pause for the debounce, until Close.
func (r *Reloader) run(relevant func(string) bool) {
	defer close(r.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-r.done:
			return
		case ev, ok := <-r.watcher.Events:
			if !ok {
				return
			}
			if relevant(ev.Name) {
				timer.Reset(debounce)
			}
		case err, ok := <-r.watcher.Errors:
			if !ok {
				return
			}
			// Events may have been lost (an overflowing queue): read the
			// files rather than miss a change.
			r.log.Warn("tlsreload: watching the certificate files", "err", err)
			timer.Reset(debounce)
		case <-timer.C:
			_ = r.Reload() // logged, and reported through OnReload
		}
	}
}
