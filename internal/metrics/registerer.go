package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics is a prometheus.Registerer of its own registry, so that the CLI
// hands its one set per process to a workq.Client as the Client's
// Config.MetricsRegisterer, which uses it as is instead of making a set.

// Register registers c where the collectors of m are.
func (m *Metrics) Register(c prometheus.Collector) error { return m.into.Register(c) }

// MustRegister registers cs where the collectors of m are, panicking on an
// error.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.into.MustRegister(cs...) }

// Unregister unregisters c from where the collectors of m are.
func (m *Metrics) Unregister(c prometheus.Collector) bool { return m.into.Unregister(c) }
