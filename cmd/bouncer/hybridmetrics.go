package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/hybrid"
)

// hybridCollector exports a hybrid limiter's counters at every scrape
// (hybrid.Limiter.Stats).
type hybridCollector struct {
	h *hybrid.Limiter

	leases, parked, syncs, over, cacheHits, throttled, decisions, exchanges, shareDenied *prometheus.Desc
	regionUsed, regionAllowance, regionAge                                               *prometheus.Desc
}

func newHybridCollector(h *hybrid.Limiter) *hybridCollector {
	return &hybridCollector{
		h:               h,
		leases:          prometheus.NewDesc("bouncer_hybrid_leases_total", "Leases of quota: taken from Redis, returned with units left (buckets), expired with units left (windows, whose units come back when the window ends).", []string{"event"}, nil),
		parked:          prometheus.NewDesc("bouncer_hybrid_units_parked", "Units held in this instance's leases, not yet spent.", nil, nil),
		syncs:           prometheus.NewDesc("bouncer_hybrid_syncs_total", "Pushes of async usage to Redis (every key touched since the last, in one go).", nil, nil),
		over:            prometheus.NewDesc("bouncer_hybrid_over_admitted_total", "Async units this instance admitted past the shared limit, as its pushes found.", nil, nil),
		cacheHits:       prometheus.NewDesc("bouncer_hybrid_cache_hits_total", "Checks denied by the over-limit cache, without a Redis call.", nil, nil),
		throttled:       prometheus.NewDesc("bouncer_hybrid_throttled_total", "Checks denied by the local pre-throttle (this instance alone had admitted the whole limit).", nil, nil),
		decisions:       prometheus.NewDesc("bouncer_hybrid_decisions_total", "Decisions by mode: strict checks sent to Redis as they are; lease and async (key, limit) pairs allowed locally or with a lease.", []string{"mode"}, nil),
		exchanges:       prometheus.NewDesc("bouncer_hybrid_share_exchanges_total", "Exchanges of async pairs' shares with Redis (every pair near its limit at a sync, in one go).", nil, nil),
		shareDenied:     prometheus.NewDesc("bouncer_hybrid_share_denied_total", "Async checks denied because this instance's share of a limit near its end was spent.", nil, nil),
		regionUsed:      prometheus.NewDesc("bouncer_region_used_units", "With --region: what each region had counted of the global limits near their end, as this instance last heard (its own region's included).", []string{"region"}, nil),
		regionAllowance: prometheus.NewDesc("bouncer_region_allowance_units", "With --region: what each region's instances may still admit of those limits until their next syncs, as this instance last heard: the region's share.", []string{"region"}, nil),
		regionAge:       prometheus.NewDesc("bouncer_region_age_seconds", "With --region: how old the newest share heard from each other region is (-1: none yet); past --region-ttl the region is held to its static share.", []string{"region"}, nil),
	}
}

func (c *hybridCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leases, c.parked, c.syncs, c.over, c.cacheHits, c.throttled, c.decisions, c.exchanges, c.shareDenied, c.regionUsed, c.regionAllowance, c.regionAge} {
		ch <- d
	}
}

func (c *hybridCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.h.Stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	counter(c.leases, float64(s.LeasesTaken), "taken")
	counter(c.leases, float64(s.LeasesReturned), "returned")
	counter(c.leases, float64(s.LeasesExpired), "expired")
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(s.UnitsParked))
	counter(c.syncs, float64(s.Syncs))
	counter(c.over, float64(s.OverAdmitted))
	counter(c.cacheHits, float64(s.CacheHits))
	counter(c.throttled, float64(s.Throttled))
	counter(c.decisions, float64(s.Strict), "strict")
	counter(c.decisions, float64(s.Lease), "lease")
	counter(c.decisions, float64(s.Async), "async")
	counter(c.exchanges, float64(s.Exchanges))
	counter(c.shareDenied, float64(s.ShareDenied))
	for _, r := range c.h.Regions() {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, r.Region)
		}
		gauge(c.regionUsed, float64(r.Used))
		gauge(c.regionAllowance, float64(r.Allowance))
		if r.Age >= 0 {
			gauge(c.regionAge, r.Age.Seconds())
		} else {
			gauge(c.regionAge, -1)
		}
	}
}
