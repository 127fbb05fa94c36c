package kafkasinkotel

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// RegisterSnapshotMetrics registers observable instruments on meter that
// read the snapshot progress of the pgcdc.Run that reports to mon
// (pgcdc.Config.Monitor) at each collection: for each table its rows
// written by this Run, whether it is done, the rate, the estimate of the
// rows left (-1 when unknown) and of the seconds left (0 when unknown or
// done); and for each key range of a table a parallel snapshot reads
// (pgcdc.Config.SnapshotWorkers) its rows and whether it is done. Each
// observation has the attributes pgcdc.slot (slot) and pgcdc.table, a
// range's pgcdc.snapshot.range too (its number in key order, from 0). The
// names are those of kafkasinkprom's metrics, dot-separated.
func RegisterSnapshotMetrics(meter metric.Meter, mon *pgcdc.Monitor, slot string) error {
	rows, err1 := meter.Int64ObservableCounter("kafkasink.pgcdc.snapshot.table.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Snapshot rows written by this Run, by table."))
	done, err2 := meter.Int64ObservableGauge("kafkasink.pgcdc.snapshot.table.done", metric.WithUnit("1"),
		metric.WithDescription("1 when the snapshot read the table to its end, else 0."))
	left, err3 := meter.Int64ObservableGauge("kafkasink.pgcdc.snapshot.table.rows_left", metric.WithUnit("{row}"),
		metric.WithDescription("Estimate of the rows the snapshot has still to read of the table (from pg_class.reltuples); -1 when unknown."))
	rate, err4 := meter.Float64ObservableGauge("kafkasink.pgcdc.snapshot.table.rate", metric.WithUnit("{row}/s"),
		metric.WithDescription("Snapshot rows per second this Run wrote of the table, from its start to its last chunk."))
	timeLeft, err5 := meter.Float64ObservableGauge("kafkasink.pgcdc.snapshot.table.time_left", metric.WithUnit("s"),
		metric.WithDescription("Estimate of the time the snapshot needs for the rest of the table, at its rate so far; 0 when unknown or done."))
	rangeRows, err6 := meter.Int64ObservableCounter("kafkasink.pgcdc.snapshot.range.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Snapshot rows written by this Run from one key range of the table."))
	rangeDone, err7 := meter.Int64ObservableGauge("kafkasink.pgcdc.snapshot.range.done", metric.WithUnit("1"),
		metric.WithDescription("1 when the snapshot read the key range to its end, else 0."))
	for _, err := range []error{err1, err2, err3, err4, err5, err6, err7} {
		if err != nil {
			return err
		}
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for table, p := range mon.Stats().SnapshotTables {
			base := []attribute.KeyValue{attribute.String("pgcdc.slot", slot), attribute.String("pgcdc.table", table)}
			attrs := metric.WithAttributes(base...)
			o.ObserveInt64(rows, p.Rows, attrs)
			o.ObserveInt64(done, flag(p.Done), attrs)
			o.ObserveInt64(left, p.RowsLeft, attrs)
			o.ObserveFloat64(rate, p.RowsPerSecond, attrs)
			o.ObserveFloat64(timeLeft, p.TimeLeft.Seconds(), attrs)
			for i, r := range p.Ranges {
				ra := metric.WithAttributes(append(base, attribute.String("pgcdc.snapshot.range", strconv.Itoa(i)))...)
				o.ObserveInt64(rangeRows, r.Rows, ra)
				o.ObserveInt64(rangeDone, flag(r.Done), ra)
			}
		}
		return nil
	}, rows, done, left, rate, timeLeft, rangeRows, rangeDone)
	return err
}

// flag is 1 for true, 0 for false.
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
