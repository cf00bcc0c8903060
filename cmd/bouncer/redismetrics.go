package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/redisstore"
)

// redisCollector exports a Redis store's health, per node, at every
// scrape (redisstore.Store.Health).
type redisCollector struct {
	s *redisstore.Store

	connected, open, slow, calls, failures, slowCalls, opens *prometheus.Desc
}

func newRedisCollector(s *redisstore.Store) *redisCollector {
	node := []string{"node"}
	return &redisCollector{
		s:         s,
		connected: prometheus.NewDesc("bouncer_redis_connected", "1 once the store has connected to Redis; 0 while it has not yet (it decides by policy meanwhile).", nil, nil),
		open:      prometheus.NewDesc("bouncer_redis_breaker_open", "Per Redis node: 1 while its circuit breaker is open (its keys decide by policy without calling it), 0.5 while a trial call is in flight, 0 when closed.", node, nil),
		slow:      prometheus.NewDesc("bouncer_redis_node_slow", "Per Redis node: 1 while at least 10 calls of the last 10 s missed the store's deadline, and 1% of the calls since the first of them.", node, nil),
		calls:     prometheus.NewDesc("bouncer_redis_calls_total", "Per Redis node: checks, refunds and exchanges of async shares sent (a batched call of n checks counts n; an exchange, one).", node, nil),
		failures:  prometheus.NewDesc("bouncer_redis_call_failures_total", "Per Redis node: calls that ended in an error (no connection, an error reply).", node, nil),
		slowCalls: prometheus.NewDesc("bouncer_redis_slow_calls_total", "Per Redis node: calls whose reply had not come by the store's deadline; their checks decided by policy.", node, nil),
		opens:     prometheus.NewDesc("bouncer_redis_breaker_opens_total", "Per Redis node: times its circuit breaker opened.", node, nil),
	}
}

func (c *redisCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.open, c.slow, c.calls, c.failures, c.slowCalls, c.opens} {
		ch <- d
	}
}

func (c *redisCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.s.Health()
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, b2f(h.Connected))
	for _, n := range h.Nodes {
		addr := n.Addr
		if addr == "" {
			if n.Calls == 0 {
				continue // a Cluster's unmapped slots, never used
			}
			addr = "unmapped"
		}
		open := 0.0
		switch n.Breaker {
		case redisstore.BreakerOpen:
			open = 1
		case redisstore.BreakerHalfOpen:
			open = 0.5
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open, addr)
		ch <- prometheus.MustNewConstMetric(c.slow, prometheus.GaugeValue, b2f(n.Slow), addr)
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(n.Calls), addr)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(n.Failures), addr)
		ch <- prometheus.MustNewConstMetric(c.slowCalls, prometheus.CounterValue, float64(n.SlowN), addr)
		ch <- prometheus.MustNewConstMetric(c.opens, prometheus.CounterValue, float64(n.Opens), addr)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
