// Package kafkasinkprom exports a kafkasink.Sink's Stats, and a
// pgcdc.Run's Monitor, as Prometheus metrics.
//
//	reg.MustRegister(kafkasinkprom.NewCollector(sink))
//	reg.MustRegister(kafkasinkprom.NewRunCollector(monitor, cfg.Slot))
//
// It is a module of its own, so that the library does not depend on the
// Prometheus client: import it only if you use Prometheus. Every metric
// carries the sink's id as the label sink_id. franz-go's own client
// metrics (github.com/twmb/franz-go/plugin/kprom) combine with these
// through kafkasink.Config.ClientOptions and kgo.WithHooks.
package kafkasinkprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkasink/kafkasink"
)

// Collector collects one sink's metrics from its Stats at each scrape.
type Collector struct {
	sink *kafkasink.Sink
	id   string

	writes, events, written, records, bytes *prometheus.Desc
	rejected, deadLettered, skipped         *prometheus.Desc
	transactions, retries, durations        *prometheus.Desc
	checkpointTime, checkpointLSN, openTxn  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the collector of sink, whose metrics carry its id
// (Sink.ID) as the label sink_id.
func NewCollector(sink *kafkasink.Sink) *Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kafkasink_"+name, help, append([]string{"sink_id"}, labels...), nil)
	}
	return &Collector{
		sink: sink, id: sink.ID(),
		writes:         desc("writes_total", "Writes that returned nil having written something."),
		events:         desc("events_total", "Events in successful Writes, skipped ones included."),
		written:        desc("events_written_total", "Events written to their topics."),
		records:        desc("records_total", "Records produced, dead-letter records included, checkpoints excluded."),
		bytes:          desc("bytes_total", "Bytes of keys, values and headers produced."),
		rejected:       desc("events_rejected_total", "Events rejected, each time one is."),
		deadLettered:   desc("events_dead_lettered_total", "Rejected events written to the dead-letter topic."),
		skipped:        desc("events_skipped_total", "Events skipped: reason redelivered (the checkpoint covered them) or encoder (left out on purpose).", "reason"),
		transactions:   desc("transactions_total", "Transactions ended, by outcome (committed, aborted).", "outcome"),
		retries:        desc("transaction_retries_total", "Transactions tried again inside a Write after a retryable failure."),
		durations:      desc("transaction_duration_seconds", "Durations of committed transactions, from begin to commit."),
		checkpointTime: desc("checkpoint_timestamp_seconds", "When the last Write that moved the checkpoint committed, as a Unix time; 0 before the first."),
		checkpointLSN:  desc("checkpoint_lsn", "The commit LSN of the checkpoint's position (a WAL byte position)."),
		openTxn:        desc("open_transaction_seconds", "How long the transaction that may still be open has been open; 0 when none may be."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.writes, c.events, c.written, c.records, c.bytes, c.rejected, c.deadLettered,
		c.skipped, c.transactions, c.retries, c.durations, c.checkpointTime, c.checkpointLSN, c.openTxn} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats per scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.sink.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{c.id}, labels...)...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, c.id)
	}
	counter(c.writes, st.Writes)
	counter(c.events, st.Events)
	counter(c.written, st.Written)
	counter(c.records, st.Records)
	counter(c.bytes, st.Bytes)
	counter(c.rejected, st.Rejected)
	counter(c.deadLettered, st.DeadLettered)
	counter(c.skipped, st.SkippedRedelivered, "redelivered")
	counter(c.skipped, st.SkippedByEncoder, "encoder")
	counter(c.transactions, st.Committed, "committed")
	counter(c.transactions, st.Aborted, "aborted")
	counter(c.retries, st.Retries)

	h := st.TransactionDurations
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cumulative uint64
	for i, bound := range h.Bounds {
		cumulative += uint64(h.Counts[i])
		buckets[bound.Seconds()] = cumulative
	}
	ch <- prometheus.MustNewConstHistogram(c.durations, uint64(h.Count), h.Sum.Seconds(), buckets, c.id)

	var at float64
	if t := st.Checkpoint.Time; !t.IsZero() {
		at = float64(t.UnixNano()) / 1e9
	}
	gauge(c.checkpointTime, at)
	gauge(c.checkpointLSN, float64(st.Checkpoint.Position.LSN))
	gauge(c.openTxn, st.OpenTransaction.Seconds())
}
