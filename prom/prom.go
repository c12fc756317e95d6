// Package prom keeps Prometheus metrics of leash Clients. A [Metrics] is a
// [leash.Observer]: pass it as leash.Options.Observer (one Metrics may serve
// several Clients) and register it with a prometheus.Registerer:
//
//	m := prom.New(nil)
//	prometheus.MustRegister(m)
//	c, err := leash.New(store, &leash.Options{Observer: m})
//
// The metrics, with their labels:
//
//	leash_acquires_total{kind,result}      attempts to take a lock that ended (Lock,
//	                                       TryLock, Acquire...; re-entries are not
//	                                       attempts); result "acquired", "not_acquired"
//	                                       (held by someone else until the call gave
//	                                       up), "restart_grace" (refused by the store's
//	                                       restart grace, see leash.ErrRestartGrace)
//	                                       or "error" (the store failed or refused
//	                                       the request, e.g. leash.ErrNotALock, or
//	                                       the Client closed)
//	leash_acquire_wait_seconds{kind}       how long the calls that acquired took
//	leash_locks_held{kind}                 locks held now (re-entries count once)
//	leash_hold_seconds{kind,end}           how long locks were held; end "released" or "lost"
//	leash_lost_total{kind,reason}          locks lost, by reason: "expired",
//	                                       "unreachable", "released_elsewhere",
//	                                       "taken_over", "max_hold", "stalled", "closed",
//	                                       "revoked" (force-unlocked: leash.ErrRevoked),
//	                                       or "other" (a reason newer than this package)
//	leash_renewal_rounds_total             watchdog renewal rounds
//	leash_renewal_failures_total           locks a round could not renew (retried until
//	                                       their validity ends; a loss is counted in
//	                                       leash_lost_total)
//	leash_renewal_round_seconds            how long the rounds took
//
// kind is "mutex", "fair", "read", "write" or "permit". Lock names are not
// labels: they often carry ids (an order number, a job run), and a label per
// name would grow without bound.
package prom

import (
	"errors"

	"github.com/leash-go/leash"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Metrics. A nil *Options means all defaults.
type Options struct {
	// Namespace prefixes every metric name. Default "leash".
	Namespace string
	// ConstLabels are added to every metric, such as the service's name.
	ConstLabels prometheus.Labels
}

// Metrics is a leash.Observer that keeps Prometheus metrics, and the
// prometheus.Collector that reports them. Its methods are safe for
// concurrent use.
type Metrics struct {
	acquires      *prometheus.CounterVec
	wait          *prometheus.HistogramVec
	held          *prometheus.GaugeVec
	hold          *prometheus.HistogramVec
	lost          *prometheus.CounterVec
	rounds        prometheus.Counter
	renewFailures prometheus.Counter
	roundTime     prometheus.Histogram
}

var (
	_ leash.Observer       = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

// New returns a Metrics with no observations yet.
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = "leash"
	}
	counter := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: o.Namespace, Name: name, Help: help, ConstLabels: o.ConstLabels}
	}
	histogram := func(name, help string, buckets []float64) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Namespace: o.Namespace, Name: name, Help: help, ConstLabels: o.ConstLabels, Buckets: buckets}
	}
	return &Metrics{
		acquires: prometheus.NewCounterVec(counter("acquires_total",
			"Attempts to take a lock that ended (re-entries excepted), by result: acquired, not_acquired (held by someone else until the call gave up), restart_grace (refused by the store's restart grace) or error (the store failed, or the Client closed)."),
			[]string{"kind", "result"}),
		wait: prometheus.NewHistogramVec(histogram("acquire_wait_seconds",
			"How long the calls that acquired a lock took, waiting included.",
			prometheus.ExponentialBuckets(0.0005, 2, 18)), // 0.5ms to about 65s
			[]string{"kind"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: o.Namespace, Name: "locks_held",
			Help: "Locks held now; re-entries count once.", ConstLabels: o.ConstLabels},
			[]string{"kind"}),
		hold: prometheus.NewHistogramVec(histogram("hold_seconds",
			"How long locks were held, by how the hold ended: released or lost.",
			prometheus.ExponentialBuckets(0.001, 2, 24)), // 1ms to about 2.3h
			[]string{"kind", "end"}),
		lost: prometheus.NewCounterVec(counter("lost_total",
			"Locks lost while held, by reason."),
			[]string{"kind", "reason"}),
		rounds: prometheus.NewCounter(counter("renewal_rounds_total",
			"Watchdog renewal rounds.")),
		renewFailures: prometheus.NewCounter(counter("renewal_failures_total",
			"Locks a renewal round could not renew; they are retried until their validity ends.")),
		roundTime: prometheus.NewHistogram(histogram("renewal_round_seconds",
			"How long the watchdog's renewal rounds took.",
			prometheus.ExponentialBuckets(0.0005, 2, 16))), // 0.5ms to about 16s
	}
}

// Observe records one event; see [leash.Observer].
func (m *Metrics) Observe(e leash.Event) {
	kind := e.Kind.String()
	switch e.Op {
	case leash.OpAcquired:
		m.acquires.WithLabelValues(kind, "acquired").Inc()
		m.wait.WithLabelValues(kind).Observe(e.Wait.Seconds())
		m.held.WithLabelValues(kind).Inc()
	case leash.OpNotAcquired:
		result := "error"
		var na *leash.NotAcquiredError
		if errors.As(e.Err, &na) {
			result = "not_acquired"
			if na.Grace {
				result = "restart_grace"
			}
		}
		m.acquires.WithLabelValues(kind, result).Inc()
	case leash.OpReleased:
		m.held.WithLabelValues(kind).Dec()
		m.hold.WithLabelValues(kind, "released").Observe(e.Held.Seconds())
	case leash.OpLost:
		m.held.WithLabelValues(kind).Dec()
		m.hold.WithLabelValues(kind, "lost").Observe(e.Held.Seconds())
		m.lost.WithLabelValues(kind, reasonLabel(e.Reason)).Inc()
	case leash.OpRenewed:
		m.rounds.Inc()
		m.renewFailures.Add(float64(e.Failed))
		m.roundTime.Observe(e.Took.Seconds())
	}
}

// reasonLabels are the reason label's values: fixed here, so that rewording
// a reason in leash's logs never renames a series.
var reasonLabels = map[leash.Reason]string{
	leash.ReasonExpired:           "expired",
	leash.ReasonUnreachable:       "unreachable",
	leash.ReasonReleasedElsewhere: "released_elsewhere",
	leash.ReasonTakenOver:         "taken_over",
	leash.ReasonMaxHold:           "max_hold",
	leash.ReasonStalled:           "stalled",
	leash.ReasonClosed:            "closed",
	leash.ReasonRevoked:           "revoked",
}

// reasonLabel is the reason label's value for r ("other" for a reason this
// version does not know).
func reasonLabel(r leash.Reason) string {
	if l, ok := reasonLabels[r]; ok {
		return l
	}
	return "other"
}

// collectors are the metrics, for Describe and Collect.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acquires, m.wait, m.held, m.hold, m.lost, m.rounds, m.renewFailures, m.roundTime}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
