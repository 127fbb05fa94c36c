package kafkasinkprom

import (
	"encoding/json"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// RunCollector collects the metrics of a pgcdc.Run from its Monitor at
// each scrape.
type RunCollector struct {
	mon  *pgcdc.Monitor
	slot string

	state, reconnects, lastError            *prometheus.Desc
	serverWALEnd, confirmed, lag            *prometheus.Desc
	events, snapshotRows, lastCommit, spool *prometheus.Desc
	tableRows, tableDone                    *prometheus.Desc
	tableRate, tableLeft, tableTimeLeft     *prometheus.Desc
	rangeRows, rangeDone                    *prometheus.Desc
	backfillRows, backfillChunks            *prometheus.Desc
	backfillLeft, backfillRate              *prometheus.Desc
	backfillPaused, backfillKey             *prometheus.Desc
}

var _ prometheus.Collector = (*RunCollector)(nil)

// runStates are the values of the state label, one series each.
var runStates = []pgcdc.RunState{pgcdc.RunNotStarted, pgcdc.RunConnecting, pgcdc.RunSnapshotting,
	pgcdc.RunStreaming, pgcdc.RunWaiting, pgcdc.RunStopped}

// NewRunCollector returns the collector of the Run that reports to mon
// (pgcdc.Config.Monitor); its metrics carry slot (pgcdc.Config.Slot) as
// the label slot.
func NewRunCollector(mon *pgcdc.Monitor, slot string) *RunCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kafkasink_pgcdc_"+name, help, append([]string{"slot"}, labels...), nil)
	}
	return &RunCollector{
		mon: mon, slot: slot,
		state:         desc("state", "1 for the state Run is in (not started, connecting, snapshotting, streaming, waiting to reconnect, stopped), 0 for the others.", "state"),
		reconnects:    desc("reconnects_total", "Attempts after Run's first, each after a failed one."),
		lastError:     desc("last_error_timestamp_seconds", "When the last attempt failed, as a Unix time; 0 before the first failure."),
		serverWALEnd:  desc("server_wal_end_lsn", "The end of the server's WAL as its last message said (a WAL byte position)."),
		confirmed:     desc("confirmed_lsn", "The position last confirmed to the slot: every change below it is in Kafka."),
		lag:           desc("lag_bytes", "WAL between the server's end and the confirmed position."),
		events:        desc("events_total", "Events written."),
		snapshotRows:  desc("snapshot_rows_total", "Snapshot rows written."),
		lastCommit:    desc("last_commit_timestamp_seconds", "Commit time of the newest change written, as a Unix time; 0 before the first."),
		spool:         desc("spool_bytes", "Bytes the spool holds on disk for streamed transactions not yet committed."),
		tableRows:     desc("snapshot_table_rows_total", "Snapshot rows written by this Run, by table.", "table"),
		tableDone:     desc("snapshot_table_done", "1 when the snapshot read the table to its end, else 0.", "table"),
		tableRate:     desc("snapshot_table_rows_per_second", "Snapshot rows per second this Run wrote of the table, from its start to its last chunk.", "table"),
		tableLeft:     desc("snapshot_table_rows_left", "Estimate of the rows the snapshot has still to read of the table (from pg_class.reltuples); -1 when unknown.", "table"),
		tableTimeLeft: desc("snapshot_table_seconds_left", "Estimate of the time the snapshot needs for the rest of the table, at its rate so far; 0 when unknown or done.", "table"),
		// One series per key range of a table a parallel snapshot
		// reads (pgcdc.Config.SnapshotWorkers), range numbered in key
		// order from 0.
		rangeRows: desc("snapshot_range_rows_total", "Snapshot rows written by this Run from one key range of the table.", "table", "range"),
		rangeDone: desc("snapshot_range_done", "1 when the snapshot read the key range to its end, else 0.", "table", "range"),
		// The backfills' series exist while the backfill is unfinished.
		backfillRows:   desc("backfill_rows_total", "Rows an unfinished backfill delivered, across restarts.", "backfill", "table"),
		backfillChunks: desc("backfill_chunks_total", "Chunks an unfinished backfill read, across restarts.", "backfill", "table"),
		backfillLeft:   desc("backfill_rows_left", "Estimate of the rows an unfinished backfill has still to read (from pg_class.reltuples); -1 when unknown.", "backfill", "table"),
		backfillRate:   desc("backfill_rows_per_second", "Rows per second an unfinished backfill delivered since this run began or took it.", "backfill", "table"),
		backfillPaused: desc("backfill_paused", "1 when the unfinished backfill is paused, else 0.", "backfill", "table"),
		// The key as a label: a new series with every chunk, for as
		// long as the backfill runs.
		backfillKey: desc("backfill_last_key_info", "1, with the key of the last row the backfill read as a JSON array of its columns' text (last_key; empty before the first chunk).", "backfill", "table", "last_key"),
	}
}

// Describe implements prometheus.Collector.
func (c *RunCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.reconnects, c.lastError, c.serverWALEnd, c.confirmed, c.lag,
		c.events, c.snapshotRows, c.lastCommit, c.spool, c.tableRows, c.tableDone,
		c.tableRate, c.tableLeft, c.tableTimeLeft, c.rangeRows, c.rangeDone,
		c.backfillRows, c.backfillChunks, c.backfillLeft, c.backfillRate, c.backfillPaused, c.backfillKey} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Monitor.Stats per scrape.
func (c *RunCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.mon.Stats()
	for _, s := range runStates {
		var v float64
		if s == st.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, c.slot, s.String())
	}
	unix := func(d *prometheus.Desc, ns int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(ns)/1e9, c.slot)
	}
	var lastError, lastCommit int64
	if !st.LastErrorTime.IsZero() {
		lastError = st.LastErrorTime.UnixNano()
	}
	if !st.LastCommit.IsZero() {
		lastCommit = st.LastCommit.UnixNano()
	}
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(st.Reconnects), c.slot)
	unix(c.lastError, lastError)
	ch <- prometheus.MustNewConstMetric(c.serverWALEnd, prometheus.GaugeValue, float64(st.ServerWALEnd), c.slot)
	ch <- prometheus.MustNewConstMetric(c.confirmed, prometheus.GaugeValue, float64(st.Confirmed), c.slot)
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.LagBytes), c.slot)
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(st.Events), c.slot)
	ch <- prometheus.MustNewConstMetric(c.snapshotRows, prometheus.CounterValue, float64(st.SnapshotRows), c.slot)
	unix(c.lastCommit, lastCommit)
	ch <- prometheus.MustNewConstMetric(c.spool, prometheus.GaugeValue, float64(st.SpoolBytes), c.slot)
	for table, p := range st.SnapshotTables {
		c.collectTable(ch, table, p)
	}
	for _, b := range st.Backfills {
		var paused float64
		if b.Paused {
			paused = 1
		}
		var key []byte
		if b.LastKey != nil {
			key, _ = json.Marshal(b.LastKey)
		}
		ch <- prometheus.MustNewConstMetric(c.backfillRows, prometheus.CounterValue, float64(b.Rows), c.slot, b.ID, b.Table)
		ch <- prometheus.MustNewConstMetric(c.backfillChunks, prometheus.CounterValue, float64(b.Chunks), c.slot, b.ID, b.Table)
		ch <- prometheus.MustNewConstMetric(c.backfillLeft, prometheus.GaugeValue, float64(b.RowsLeft), c.slot, b.ID, b.Table)
		ch <- prometheus.MustNewConstMetric(c.backfillRate, prometheus.GaugeValue, b.RowsPerSecond, c.slot, b.ID, b.Table)
		ch <- prometheus.MustNewConstMetric(c.backfillPaused, prometheus.GaugeValue, paused, c.slot, b.ID, b.Table)
		ch <- prometheus.MustNewConstMetric(c.backfillKey, prometheus.GaugeValue, 1, c.slot, b.ID, b.Table, string(key))
	}
}

// collectTable sends the series of one snapshot table.
func (c *RunCollector) collectTable(ch chan<- prometheus.Metric, table string, p pgcdc.TableProgress) {
	ch <- prometheus.MustNewConstMetric(c.tableRows, prometheus.CounterValue, float64(p.Rows), c.slot, table)
	ch <- prometheus.MustNewConstMetric(c.tableDone, prometheus.GaugeValue, one(p.Done), c.slot, table)
	ch <- prometheus.MustNewConstMetric(c.tableRate, prometheus.GaugeValue, p.RowsPerSecond, c.slot, table)
	ch <- prometheus.MustNewConstMetric(c.tableLeft, prometheus.GaugeValue, float64(p.RowsLeft), c.slot, table)
	ch <- prometheus.MustNewConstMetric(c.tableTimeLeft, prometheus.GaugeValue, p.TimeLeft.Seconds(), c.slot, table)
	for i, r := range p.Ranges {
		n := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(c.rangeRows, prometheus.CounterValue, float64(r.Rows), c.slot, table, n)
		ch <- prometheus.MustNewConstMetric(c.rangeDone, prometheus.GaugeValue, one(r.Done), c.slot, table, n)
	}
}

// one is 1 for true, 0 for false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
