package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/memstore"
)

// stateFile saves a memory store to --state-file every
// --state-save-interval and when it is closed, after the service has
// drained.
type stateFile struct {
	ms       *memstore.Store
	path     string
	log      *slog.Logger
	saves    *prometheus.CounterVec
	seconds  prometheus.Histogram
	keys     prometheus.Gauge
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// openStateFile restores ms from path, if the file exists, and starts
// saving it there every interval. A file that cannot be read whole is an
// error: the service refuses to start rather than forget the budgets it
// holds (move the file away to start empty).
func openStateFile(ms *memstore.Store, path string, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) (*stateFile, error) {
	t0 := time.Now()
	ld, err := ms.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("no state file yet: starting empty", "file", path)
	case err != nil:
		return nil, fmt.Errorf("--state-file: %v (move the file away to start empty)", err)
	default:
		log.Info("restored state", "file", path, "states", ld.States, "fresh", ld.Fresh, "took", time.Since(t0).Round(time.Millisecond))
	}
	sf := &stateFile{
		ms: ms, path: path, log: log,
		saves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bouncer_state_saves_total",
			Help: "Saves of the memory store's state to --state-file, by result (ok or error)."}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bouncer_state_save_seconds",
			Help: "How long a save of the memory store's state took.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{Name: "bouncer_state_keys_saved",
			Help: "(key, limit) states written by the last save that succeeded."}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	sf.saves.WithLabelValues("ok")
	sf.saves.WithLabelValues("error")
	reg.MustRegister(sf.saves, sf.seconds, sf.keys)
	go sf.run(interval)
	return sf, nil
}

func (sf *stateFile) run(interval time.Duration) {
	defer close(sf.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			sf.save()
		case <-sf.stop:
			return
		}
	}
}

func (sf *stateFile) save() error {
	t0 := time.Now()
	saved, err := sf.ms.Save(sf.path)
	sf.seconds.Observe(time.Since(t0).Seconds())
	if err != nil {
		sf.saves.WithLabelValues("error").Inc()
		sf.log.Error("saving the state failed; the last good file stays", "file", sf.path, "err", err)
		return err
	}
	sf.saves.WithLabelValues("ok").Inc()
	sf.keys.Set(float64(saved.States))
	return nil
}

// Close stops the periodic saves, saves once more, and closes the store.
func (sf *stateFile) Close() error {
	var err error
	sf.stopOnce.Do(func() {
		close(sf.stop)
		<-sf.done
		if err = sf.save(); err == nil {
			sf.log.Info("saved state", "file", sf.path)
		}
		sf.ms.Close()
	})
	return err
}
