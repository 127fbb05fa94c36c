// Package kafkasinkotel reports a kafkasink.Sink to OpenTelemetry: its
// Stats as metrics, and each of its transactions as a span.
//
//	tracer := kafkasinkotel.NewTracer(tp.Tracer("kafkasink"))
//	sink, err := kafkasink.New(ctx, kafkasink.Config{..., Hooks: []kafkasink.Hook{tracer}})
//	err = kafkasinkotel.RegisterMetrics(mp.Meter("kafkasink"), sink)
//
// It is a module of its own, so that the library does not depend on
// OpenTelemetry. franz-go's own client instrumentation
// (github.com/twmb/franz-go/plugin/kotel) combines with it through
// kafkasink.Config.ClientOptions and kgo.WithHooks.
package kafkasinkotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkasink/kafkasink"
)

// RegisterMetrics registers observable instruments on meter that read
// sink.Stats at each collection, with the attribute sink.id. The names
// are those of kafkasinkprom's metrics, dot-separated.
func RegisterMetrics(meter metric.Meter, sink *kafkasink.Sink) error {
	id := metric.WithAttributes(attribute.String("sink.id", sink.ID()))
	counters := []struct {
		name, unit, help string
		value            func(kafkasink.Stats) int64
	}{
		{"kafkasink.writes", "{write}", "Writes that returned nil having written something.", func(s kafkasink.Stats) int64 { return s.Writes }},
		{"kafkasink.events", "{event}", "Events in successful Writes, skipped ones included.", func(s kafkasink.Stats) int64 { return s.Events }},
		{"kafkasink.events.written", "{event}", "Events written to their topics.", func(s kafkasink.Stats) int64 { return s.Written }},
		{"kafkasink.records", "{record}", "Records produced, dead-letter records included, checkpoints excluded.", func(s kafkasink.Stats) int64 { return s.Records }},
		{"kafkasink.bytes", "By", "Bytes of keys, values and headers produced.", func(s kafkasink.Stats) int64 { return s.Bytes }},
		{"kafkasink.events.rejected", "{event}", "Events rejected, each time one is.", func(s kafkasink.Stats) int64 { return s.Rejected }},
		{"kafkasink.events.dead_lettered", "{event}", "Rejected events written to the dead-letter topic.", func(s kafkasink.Stats) int64 { return s.DeadLettered }},
		{"kafkasink.events.skipped.redelivered", "{event}", "Events skipped because the checkpoint covered them.", func(s kafkasink.Stats) int64 { return s.SkippedRedelivered }},
		{"kafkasink.events.skipped.encoder", "{event}", "Events the encoder left out on purpose.", func(s kafkasink.Stats) int64 { return s.SkippedByEncoder }},
		{"kafkasink.transactions.committed", "{transaction}", "Transactions committed.", func(s kafkasink.Stats) int64 { return s.Committed }},
		{"kafkasink.transactions.aborted", "{transaction}", "Transactions aborted.", func(s kafkasink.Stats) int64 { return s.Aborted }},
		{"kafkasink.transaction.retries", "{transaction}", "Transactions tried again inside a Write after a retryable failure.", func(s kafkasink.Stats) int64 { return s.Retries }},
	}
	var observables []metric.Observable
	var observe []func(metric.Observer, kafkasink.Stats)
	for _, c := range counters {
		inst, err := meter.Int64ObservableCounter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.help))
		if err != nil {
			return err
		}
		value := c.value
		observables = append(observables, inst)
		observe = append(observe, func(o metric.Observer, s kafkasink.Stats) { o.ObserveInt64(inst, value(s), id) })
	}
	open, err := meter.Float64ObservableGauge("kafkasink.transaction.open", metric.WithUnit("s"),
		metric.WithDescription("How long the transaction that may still be open has been open; 0 when none may be."))
	if err != nil {
		return err
	}
	lsn, err := meter.Int64ObservableGauge("kafkasink.checkpoint.lsn", metric.WithUnit("By"),
		metric.WithDescription("The commit LSN of the checkpoint's position (a WAL byte position)."))
	if err != nil {
		return err
	}
	observables = append(observables, open, lsn)
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := sink.Stats()
		for _, f := range observe {
			f(o, s)
		}
		o.ObserveFloat64(open, s.OpenTransaction.Seconds(), id)
		o.ObserveInt64(lsn, int64(s.Checkpoint.Position.LSN), id)
		return nil
	}, observables...)
	return err
}

// Tracer is a kafkasink.Hook that records each transaction the sink ends
// as a span, from its begin to its commit or abort, with its first and
// last positions, records and bytes; an aborted one has status Error and
// the abort's cause. Put it in kafkasink.Config.Hooks.
type Tracer struct {
	tracer trace.Tracer
}

// NewTracer returns the hook that records spans with tracer.
func NewTracer(tracer trace.Tracer) *Tracer { return &Tracer{tracer: tracer} }

var (
	_ kafkasink.HookTransactionCommitted = (*Tracer)(nil)
	_ kafkasink.HookTransactionAborted   = (*Tracer)(nil)
)

// OnTransactionCommitted implements kafkasink.HookTransactionCommitted.
func (t *Tracer) OnTransactionCommitted(i kafkasink.TransactionInfo) { t.span(i, "committed", nil) }

// OnTransactionAborted implements kafkasink.HookTransactionAborted.
func (t *Tracer) OnTransactionAborted(i kafkasink.TransactionInfo, err error) {
	t.span(i, "aborted", err)
}

// span records the transaction that ended now, after i.Duration.
func (t *Tracer) span(i kafkasink.TransactionInfo, outcome string, cause error) {
	end := time.Now()
	_, span := t.tracer.Start(context.Background(), "kafkasink.transaction",
		trace.WithTimestamp(end.Add(-i.Duration)), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("kafkasink.outcome", outcome),
			attribute.String("kafkasink.position.first", i.First.String()),
			attribute.String("kafkasink.position.last", i.Last.String()),
			attribute.Int("kafkasink.records", i.Records),
			attribute.Int("kafkasink.bytes", i.Bytes),
		))
	if cause != nil {
		span.RecordError(cause)
		span.SetStatus(codes.Error, cause.Error())
	}
	span.End(trace.WithTimestamp(end))
}
