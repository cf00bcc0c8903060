package metrics

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

// Reference counts decisions under envoyproxy/ratelimit's metric names, as
// its Prometheus sink and its statsd-exporter mapping publish them, so that
// dashboards built on that project keep working:
//
//	ratelimit_service_rate_limit_total_hits{domain,key1,key2}
//	ratelimit_service_rate_limit_within_limit{domain,key1,key2}
//	ratelimit_service_rate_limit_near_limit{domain,key1,key2}
//	ratelimit_service_rate_limit_over_limit{domain,key1,key2}
//	ratelimit_service_rate_limit_shadow_mode{domain,key1,key2}
//	ratelimit_service_should_rate_limit_error{err_type}
//	ratelimit_service_config_load_success, ratelimit_service_config_load_error
//
// key1 and key2 are the first two parts of the descriptor path of the
// rule that decided (its "key_value" entries; key2 is empty for a rule
// one level deep, which Prometheus reads as no label), as that project
// names the stats of a config descriptor. They count hits (each
// descriptor's hits_addend), not descriptors, as that project counts
// them: of a request's hits, those that passed are within the limit,
// those that took the count past NearLimitRatio of the limit are near
// it, and those denied are over it (and counted in shadow_mode too for a
// shadow rule; see countHits for the one request that crosses the
// limit). Descriptors without a limit, unlimited or
// replaced are not counted, as there. Its methods are safe for
// concurrent use.
type Reference struct {
	total, within, near, over, shadow *prometheus.CounterVec

	// byRule holds each rule's five counters (*ruleCounters), so that a
	// decision neither builds labels nor looks them up; Loaded empties it,
	// so that it holds the rules of the configs served since the last load.
	byRule sync.Map

	errors               *prometheus.CounterVec
	loadOK, loadFailures prometheus.Counter
}

// NewReference registers the envoyproxy/ratelimit metrics on reg.
func NewReference(reg prometheus.Registerer) *Reference {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_service_rate_limit_" + name,
			Help: help + " (envoyproxy/ratelimit's name), by domain and the first two parts of the rule's descriptor path.",
		}, []string{"domain", "key1", "key2"})
	}
	r := &Reference{
		total:  vec("total_hits", "Hits decided"),
		within: vec("within_limit", "Hits allowed"),
		near:   vec("near_limit", "Hits that took a count past 80% of its limit"),
		over:   vec("over_limit", "Hits over their limit"),
		shadow: vec("shadow_mode", "Hits over the limit of a shadow rule, answered OK"),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_service_should_rate_limit_error",
			Help: "Requests not decided (envoyproxy/ratelimit's name), by err_type: redis_error (the store failed) or service_error (the request was refused).",
		}, []string{"err_type"}),
		loadOK: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelimit_service_config_load_success",
			Help: "Configs loaded, at start and on reload (envoyproxy/ratelimit's name).",
		}),
		loadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelimit_service_config_load_error",
			Help: "Configs refused on reload, the old one kept serving (envoyproxy/ratelimit's name).",
		}),
	}
	reg.MustRegister(r.total, r.within, r.near, r.over, r.shadow, r.errors, r.loadOK, r.loadFailures)
	return r
}

// Observe counts one Decide; it has an Engine's Observe's signature.
func (r *Reference) Observe(domain string, resp *rules.Response, err error) {
	if err != nil {
		kind := "redis_error"
		if errors.Is(err, bouncer.ErrInvalidRequest) || errors.Is(err, rules.ErrUnknownDomain) {
			kind = "service_error"
		}
		r.errors.WithLabelValues(kind).Inc()
		return
	}
	for i := range resp.Statuses {
		st := &resp.Statuses[i]
		if st.Rule == nil || st.Limit == nil || st.Unlimited {
			continue
		}
		rc := r.counters(domain, st.Rule)
		c := countHits(st)
		rc.total.Add(float64(st.Hits))
		add(rc.within, c.within)
		add(rc.near, c.near)
		add(rc.over, c.over)
		if st.Shadowed {
			add(rc.shadow, c.over)
		}
	}
}

// ruleCounters are one rule's series.
type ruleCounters struct{ total, within, near, over, shadow prometheus.Counter }

func (r *Reference) counters(domain string, rule *rules.Rule) *ruleCounters {
	if rc, ok := r.byRule.Load(rule); ok {
		return rc.(*ruleCounters)
	}
	l := referenceLabels(domain, rule)
	rc := &ruleCounters{
		total: r.total.WithLabelValues(l[:]...), within: r.within.WithLabelValues(l[:]...),
		near: r.near.WithLabelValues(l[:]...), over: r.over.WithLabelValues(l[:]...), shadow: r.shadow.WithLabelValues(l[:]...),
	}
	r.byRule.Store(rule, rc)
	return rc
}

// add adds n, if any, to c. A rule's five series appear, at 0, at its
// first decision.
func add(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// Loaded counts a config load; it has a Reloader's OnReload's signature.
// A SIGHUP that finds nothing new counts as a load, as that project
// counts every load of its files.
func (r *Reference) Loaded(_ *rules.Config, _ bool, err error) {
	r.byRule.Clear()
	if err != nil {
		r.loadFailures.Inc()
		return
	}
	r.loadOK.Inc()
}

// hitCounts are a descriptor's hits, split as envoyproxy/ratelimit splits
// them.
type hitCounts struct{ within, near, over int64 }

// countHits splits st's hits. An allowed descriptor's count went from
// limit-remaining-hits to limit-remaining: its hits are within the limit,
// and those that took the count past NearLimitRatio of it are near it. A
// denied (or shadowed) descriptor's hits are all over the limit: exactly
// that project's count when the count was at the limit already, and for
// every request of one hit; a request of several hits that crosses the
// limit counts those below it as over too (a status does not say where
// the count stood).
func countHits(st *rules.Status) hitCounts {
	hits := int64(min(st.Hits, math.MaxInt32))
	if st.Code != rules.OK || st.Shadowed {
		return hitCounts{over: hits}
	}
	limit := int64(st.Limit.RequestsPerUnit)
	nearAt := int64(math.Floor(float64(float32(limit) * float32(NearLimitRatio))))
	after := limit - min(int64(st.Remaining), limit)
	before := max(after-hits, 0)
	c := hitCounts{within: hits}
	if after > nearAt {
		c.near = after - max(before, nearAt)
	}
	return c
}

// referenceLabels are the domain, key1 and key2 labels of rule, read as
// envoyproxy/ratelimit's statsd-exporter mapping reads its stat name
// "<domain>.<key_value>.<key_value>...": split at its dots, after the
// stat name's own clean-up (':' and '|' become '_', and so do the dots
// of an IPv4 address).
func referenceLabels(domain string, rule *rules.Rule) [3]string {
	path := rule.Path
	if path == "" {
		path = rule.Name // a rule in Bouncer's format
	}
	name := statName(domain + "." + path)
	var l [3]string
	for i, part := range strings.SplitN(name, ".", 4) {
		if i < len(l) {
			l[i] = part
		}
	}
	return l
}

var (
	statReplacer = strings.NewReplacer(":", "_", "|", "_")
	ipv4         = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
)

func statName(s string) string {
	return ipv4.ReplaceAllStringFunc(statReplacer.Replace(s), func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}
