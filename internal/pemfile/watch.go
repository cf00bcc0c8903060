package pemfile

import (
	"time"

	"github.com/bouncerhq/bouncer/internal/filewatch"
)

// debounce is how long a watch waits after a change for more before it
// reloads, so that a certificate and key written one after the other, or
// a volume's swap in several steps, are read once and whole.
const debounce = 100 * time.Millisecond

// A Watch calls its reload function when its files change.
type Watch struct {
	w       *filewatch.Watcher
	done    chan struct{}
	stopped chan struct{}
}

// NewWatch watches files ("" entries are skipped) and calls reload once
// their changes pause for a short debounce; failed is told when events
// may have been lost, and reload is called then too, rather than miss a
// change. Close stops it.
func NewWatch(files []string, reload func(), failed func(error)) (*Watch, error) {
	fw, err := filewatch.New(files, nil)
	if err != nil {
		return nil, err
	}
	w := &Watch{w: fw, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		fw.Run(w.done, debounce, reload, func(err error) bool {
			failed(err)
			return true
		})
	}()
	return w, nil
}

// Close stops the watch and waits for it to end. Call it once.
func (w *Watch) Close() error {
	close(w.done)
	<-w.stopped
	return w.w.Close()
}
