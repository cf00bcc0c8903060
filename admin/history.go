package admin

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/rules"
)

// Defaults of HistoryOptions.
const (
	DefaultHistoryEvery    = 5 * time.Second
	DefaultHistoryWindow   = 15 * time.Minute
	DefaultHistoryMaxRules = 50
)

// OtherRules is the rule the history files the decisions of rules past
// HistoryOptions.MaxRules under (with domain "").
const OtherRules = "(other rules)"

// MaxHistoryPoints bounds the points a History holds per rule and
// result, whatever its Window and Every.
const MaxHistoryPoints = 10000

// HistoryOptions configure a History.
type HistoryOptions struct {
	// Every is the time between samples; zero or less means
	// DefaultHistoryEvery.
	Every time.Duration
	// Window is how far back the history goes; zero or less means
	// DefaultHistoryWindow. It holds Window/Every points, at least 2
	// and at most MaxHistoryPoints.
	Window time.Duration
	// MaxRules bounds the rules given points of their own; the
	// decisions of the rules met after that are added up under
	// OtherRules. Zero or less means DefaultHistoryMaxRules.
	MaxRules int
}

// History keeps the decisions per second of each rule, by result, over
// a sliding window, sampled from the bouncer_decisions_total and
// bouncer_degraded_denied_total counters of a Gatherer: the live page's
// first paint has its history and rates. Its memory is bounded: one
// point per sample for each result of at most MaxRules rules (a rule
// with no decision in the window gives its place up), and the counters'
// last two totals. It is safe for concurrent use.
type History struct {
	g        prometheus.Gatherer
	every    time.Duration
	size     int
	maxRules int

	mu     sync.Mutex
	ends   []time.Time // ring: when each point's interval ended
	spans  []float64   // ring: each point's interval, in seconds
	n      int         // points held, up to size
	next   int         // where the next point goes
	rings  map[ruleKey]map[string][]float64
	last   time.Time          // the last sample, zero before the first
	prev   time.Time          // the one before it
	totals map[series]float64 // the counters at last
	before map[series]float64 // the counters at prev
}

// ruleKey is a rule as the decision counters label it.
type ruleKey struct{ domain, rule string }

// series is one decision counter: a rule and a result (with degraded
// split into degraded_allowed and degraded_denied).
type series struct {
	ruleKey
	result string
}

// NewHistory returns a history of g's decision counters; nothing is
// sampled until Sample or Run.
func NewHistory(g prometheus.Gatherer, o HistoryOptions) *History {
	every, window, maxRules := o.Every, o.Window, o.MaxRules
	if every <= 0 {
		every = DefaultHistoryEvery
	}
	if window <= 0 {
		window = DefaultHistoryWindow
	}
	if maxRules <= 0 {
		maxRules = DefaultHistoryMaxRules
	}
	size := int(min(max(window/every, 2), MaxHistoryPoints))
	return &History{
		g: g, every: every, size: size, maxRules: maxRules,
		ends: make([]time.Time, size), spans: make([]float64, size), rings: map[ruleKey]map[string][]float64{},
	}
}

// Run samples at once and then every Every until ctx ends.
func (h *History) Run(ctx context.Context) {
	h.Sample(time.Now())
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Sample(now)
		}
	}
}

// Sample reads the counters at now and adds the decisions since the
// last sample as one point; the first sample only reads them. A sample
// no later than the last one is ignored.
func (h *History) Sample(now time.Time) {
	mfs, _ := h.g.Gather() // what gathered is good even when some collector failed
	totals := map[series]float64{}
	for _, mf := range mfs {
		if n := mf.GetName(); n == "bouncer_decisions_total" || n == "bouncer_degraded_denied_total" {
			for _, m := range mf.GetMetric() {
				addDecisions(totals, n, labels(m.GetLabel()), m.GetCounter().GetValue())
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && !now.After(h.last) {
		return
	}
	if !h.last.IsZero() {
		h.add(now, totals)
	}
	h.prev, h.last = h.last, now
	h.before, h.totals = h.totals, totals
}

// add writes the point of the interval from h.last to now.
func (h *History) add(now time.Time, totals map[series]float64) {
	i := h.next
	h.ends[i], h.spans[i] = now, now.Sub(h.last).Seconds()
	for _, results := range h.rings {
		for _, ring := range results {
			ring[i] = 0
		}
	}
	// In order, so that which rules get the places is not left to
	// chance when more than MaxRules come at once.
	for _, s := range slices.SortedFunc(maps.Keys(totals), compareSeries) {
		total := totals[s]
		// The counters only grow, but degraded_allowed is a difference
		// of two, which a sample read between their increments sees one
		// too high. Its step back counts as none: the moment costs a
		// point one decision too high, never a spike.
		d := max(total-h.totals[s], 0)
		if d == 0 {
			continue
		}
		k := s.ruleKey
		if h.rings[k] == nil && len(h.rings) >= h.maxRules {
			k = ruleKey{"", OtherRules}
		}
		results := h.rings[k]
		if results == nil {
			results = map[string][]float64{}
			h.rings[k] = results
		}
		if results[s.result] == nil {
			results[s.result] = make([]float64, h.size)
		}
		results[s.result][i] += d
	}
	h.next = (i + 1) % h.size
	h.n = min(h.n+1, h.size)
	// A result, or a rule, with no decision left in the window goes.
	for k, results := range h.rings {
		for r, ring := range results {
			if !slices.ContainsFunc(ring, func(v float64) bool { return v != 0 }) {
				delete(results, r)
			}
		}
		if len(results) == 0 {
			delete(h.rings, k)
		}
	}
}

// HistoryView is the history as /live.json carries it.
type HistoryView struct {
	EverySeconds  float64       `json:"every_seconds"`
	WindowSeconds float64       `json:"window_seconds"`
	Times         []float64     `json:"times"` // the end of each point's interval, in Unix seconds, oldest first
	Rules         []RuleHistory `json:"rules"`
}

// RuleHistory is one rule's decisions per second, by result: one value
// per HistoryView.Times.
type RuleHistory struct {
	Domain  string               `json:"domain"`
	Rule    string               `json:"rule"`
	Path    string               `json:"path,omitempty"` // the rule's descriptor path, when Rule is its name
	Shadow  bool                 `json:"shadow,omitempty"`
	Results map[string][]float64 `json:"results"`
}

// view returns the history, its rules named and marked from c.
func (h *History) view(c *rules.Config) *HistoryView {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := &HistoryView{EverySeconds: h.every.Seconds(), WindowSeconds: (time.Duration(h.size) * h.every).Seconds(),
		Times: make([]float64, 0, h.n), Rules: []RuleHistory{}}
	first := (h.next - h.n + h.size) % h.size
	for j := range h.n {
		v.Times = append(v.Times, float64(h.ends[(first+j)%h.size].UnixMilli())/1000)
	}
	for k, results := range h.rings {
		rh := RuleHistory{Domain: k.domain, Rule: k.rule, Results: map[string][]float64{}}
		if r := findRule(c, k.domain, k.rule); r != nil {
			rh.Path, rh.Shadow = pathOf(r), r.Shadow
		}
		for result, ring := range results {
			rates := make([]float64, h.n)
			for j := range h.n {
				at := (first + j) % h.size
				rates[j] = round2(ring[at] / h.spans[at])
			}
			rh.Results[result] = rates
		}
		v.Rules = append(v.Rules, rh)
	}
	slices.SortFunc(v.Rules, func(a, b RuleHistory) int {
		if (a.Rule == OtherRules) != (b.Rule == OtherRules) {
			return cmpBool(a.Rule == OtherRules, b.Rule == OtherRules)
		}
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Rule, b.Rule))
	})
	return v
}

// rate returns a counter's decisions per second between the last two
// samples, and false before there are two.
func (h *History) rate(s series) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prev.IsZero() {
		return 0, false
	}
	d := max(h.totals[s]-h.before[s], 0) // see add
	return round2(d / h.last.Sub(h.prev).Seconds()), true
}

func compareSeries(a, b series) int {
	return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.rule, b.rule), cmp.Compare(a.result, b.result))
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
