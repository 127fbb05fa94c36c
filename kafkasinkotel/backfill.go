package kafkasinkotel

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// RegisterBackfillMetrics registers observable instruments on meter that
// read the progress of the unfinished backfills of the pgcdc.Run that
// reports to mon (pgcdc.Config.Monitor) at each collection: for each, its
// rows and chunks done (across restarts), the estimate of the rows left
// (-1 when unknown), the rate since this run began or took it, whether it
// is paused, and the key of the last row it read. Each observation has
// the attributes pgcdc.slot (slot, pgcdc.Config.Slot), pgcdc.backfill.id
// and pgcdc.table; the key's instrument, whose value is 1, has it in
// pgcdc.backfill.last_key too, a JSON array of the key columns' text,
// empty before the first chunk. The names are those of kafkasinkprom's
// metrics, dot-separated.
func RegisterBackfillMetrics(meter metric.Meter, mon *pgcdc.Monitor, slot string) error {
	type reading struct {
		name, unit, help string
		value            func(pgcdc.BackfillProgress) int64
	}
	counters := []reading{
		{"kafkasink.pgcdc.backfill.rows", "{row}", "Rows an unfinished backfill delivered, across restarts.", func(p pgcdc.BackfillProgress) int64 { return p.Rows }},
		{"kafkasink.pgcdc.backfill.chunks", "{chunk}", "Chunks an unfinished backfill read, across restarts.", func(p pgcdc.BackfillProgress) int64 { return p.Chunks }},
	}
	gauges := []reading{
		{"kafkasink.pgcdc.backfill.rows_left", "{row}", "Estimate of the rows an unfinished backfill has still to read (from pg_class.reltuples); -1 when unknown.",
			func(p pgcdc.BackfillProgress) int64 { return p.RowsLeft }},
		{"kafkasink.pgcdc.backfill.paused", "1", "1 when the unfinished backfill is paused, else 0.", func(p pgcdc.BackfillProgress) int64 {
			if p.Paused {
				return 1
			}
			return 0
		}},
	}
	var observables []metric.Observable
	var observe []func(metric.Observer, pgcdc.BackfillProgress, metric.ObserveOption)
	add := func(inst metric.Int64Observable, value func(pgcdc.BackfillProgress) int64) {
		observables = append(observables, inst)
		observe = append(observe, func(o metric.Observer, p pgcdc.BackfillProgress, attrs metric.ObserveOption) {
			o.ObserveInt64(inst, value(p), attrs)
		})
	}
	for _, r := range counters {
		inst, err := meter.Int64ObservableCounter(r.name, metric.WithUnit(r.unit), metric.WithDescription(r.help))
		if err != nil {
			return err
		}
		add(inst, r.value)
	}
	for _, r := range gauges {
		inst, err := meter.Int64ObservableGauge(r.name, metric.WithUnit(r.unit), metric.WithDescription(r.help))
		if err != nil {
			return err
		}
		add(inst, r.value)
	}
	rate, err := meter.Float64ObservableGauge("kafkasink.pgcdc.backfill.rate", metric.WithUnit("{row}/s"),
		metric.WithDescription("Rows per second an unfinished backfill delivered since this run began or took it."))
	if err != nil {
		return err
	}
	key, err := meter.Int64ObservableGauge("kafkasink.pgcdc.backfill.last_key.info", metric.WithUnit("1"),
		metric.WithDescription("1, with the key of the last row the backfill read in the attribute pgcdc.backfill.last_key."))
	if err != nil {
		return err
	}
	observables = append(observables, rate, key)
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range mon.Stats().Backfills {
			base := []attribute.KeyValue{attribute.String("pgcdc.slot", slot), attribute.String("pgcdc.backfill.id", p.ID), attribute.String("pgcdc.table", p.Table)}
			attrs := metric.WithAttributes(base...)
			for _, f := range observe {
				f(o, p, attrs)
			}
			o.ObserveFloat64(rate, p.RowsPerSecond, attrs)
			var text []byte
			if p.LastKey != nil {
				text, _ = json.Marshal(p.LastKey)
			}
			o.ObserveInt64(key, 1, metric.WithAttributes(append(base, attribute.String("pgcdc.backfill.last_key", string(text)))...))
		}
		return nil
	}, observables...)
	return err
}
