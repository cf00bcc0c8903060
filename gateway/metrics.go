package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus metrics:
//
//   - bouncer_gateway_requests_total{route, code}: requests answered, by
//     route ("" when none matched) and status code;
//   - bouncer_gateway_request_duration_seconds{route}: how long answers
//     took;
//   - bouncer_gateway_denied_total{route, policy}: requests refused by a
//     limit;
//   - bouncer_gateway_upstream_healthy{route, upstream}: 1 while an
//     upstream takes traffic, 0 while it is down or ejected.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	denials  *prometheus.CounterVec
	healthy  *prometheus.GaugeVec
}

// NewMetrics registers the gateway's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bouncer_gateway_requests_total", Help: "Requests answered by the gateway, by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bouncer_gateway_request_duration_seconds", Help: "Time to answer a request, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bouncer_gateway_denied_total", Help: "Requests refused by a limit, by route and policy."}, []string{"route", "policy"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bouncer_gateway_upstream_healthy", Help: "1 while an upstream takes traffic, 0 while it is unhealthy or ejected."}, []string{"route", "upstream"}),
	}
	reg.MustRegister(m.requests, m.duration, m.denials, m.healthy)
	return m
}

func (m *Metrics) request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) denied(route, policy string) { m.denials.WithLabelValues(route, policy).Inc() }

func (m *Metrics) upstream(route, upstream string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	m.healthy.WithLabelValues(route, upstream).Set(v)
}
