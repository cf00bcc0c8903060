package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bouncerhq/bouncer/rlqs"
)

// rlqsCollector exports what the RLQS server has served, at every scrape
// (rlqs.Server.Stats).
type rlqsCollector struct {
	s *rlqs.Server

	streams, subs, reports, abandoned, unshared *prometheus.Desc
	idBytes, refusedStreams, refusedBuckets     *prometheus.Desc
}

func newRLQSCollector(s *rlqs.Server) *rlqsCollector {
	return &rlqsCollector{
		s:              s,
		streams:        prometheus.NewDesc("bouncer_rlqs_streams", "RLQS streams open.", nil, nil),
		subs:           prometheus.NewDesc("bouncer_rlqs_buckets", "Buckets the open RLQS streams hold (a bucket two streams report counts twice).", nil, nil),
		reports:        prometheus.NewDesc("bouncer_rlqs_bucket_reports_total", "Bucket usage reports answered over RLQS.", nil, nil),
		abandoned:      prometheus.NewDesc("bouncer_rlqs_abandoned_total", "Bucket reports answered with abandon_action: no rule, idle, or past a bound.", nil, nil),
		unshared:       prometheus.NewDesc("bouncer_rlqs_unshared_total", "Bucket reports whose share was computed among this instance's clients only, since the demands shared through the store could not be read.", nil, nil),
		idBytes:        prometheus.NewDesc("bouncer_rlqs_id_bytes", "Bytes of bucket ids the open RLQS streams hold (names and store keys).", nil, nil),
		refusedStreams: prometheus.NewDesc("bouncer_rlqs_streams_refused_total", "RLQS streams refused with RESOURCE_EXHAUSTED: their connection had as many open as it may.", nil, nil),
		refusedBuckets: prometheus.NewDesc("bouncer_rlqs_buckets_refused_total", "Reports of an RLQS bucket not held yet, answered with abandon_action because a bound was reached.", []string{"bound"}, nil),
	}
}

func (c *rlqsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.streams, c.subs, c.reports, c.abandoned, c.unshared, c.idBytes, c.refusedStreams, c.refusedBuckets} {
		ch <- d
	}
}

func (c *rlqsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(st.Streams))
	ch <- prometheus.MustNewConstMetric(c.subs, prometheus.GaugeValue, float64(st.Subscriptions))
	ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(st.Reports))
	ch <- prometheus.MustNewConstMetric(c.abandoned, prometheus.CounterValue, float64(st.Abandoned))
	ch <- prometheus.MustNewConstMetric(c.unshared, prometheus.CounterValue, float64(st.Unshared))
	ch <- prometheus.MustNewConstMetric(c.idBytes, prometheus.GaugeValue, float64(st.IDBytes))
	ch <- prometheus.MustNewConstMetric(c.refusedStreams, prometheus.CounterValue, float64(st.RefusedStreams))
	for bound, n := range map[string]uint64{
		"stream_buckets": st.OverBuckets, "server_buckets": st.OverSubscriptions,
		"conn_id_bytes": st.OverConnIDBytes, "server_id_bytes": st.OverIDBytes,
	} {
		ch <- prometheus.MustNewConstMetric(c.refusedBuckets, prometheus.CounterValue, float64(n), bound)
	}
}
