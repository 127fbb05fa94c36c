package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// reportProgress reports every interval until ctx ends, from mon (the
// Run's Monitor) and sink: the events written and per second since the
// last report, the checkpoint, and the lag in bytes of WAL (the server's
// WAL end minus the position confirmed to the slot: what the slot holds
// that is not in Kafka yet) and in time (lagAge), and each unfinished
// backfill's progress. On a terminal (term not nil) it is the status
// line, otherwise log records.
func reportProgress(ctx context.Context, logger *slog.Logger, term *terminal, every time.Duration, mon *pgcdc.Monitor, sink *kafkasink.Sink) {
	t := time.NewTicker(every)
	defer t.Stop()
	if term != nil {
		defer term.finish()
	}
	last, lastAt := mon.Stats().Events, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, st := time.Now(), mon.Stats()
		rate := int64(float64(st.Events-last)/now.Sub(lastAt).Seconds() + 0.5)
		last, lastAt = st.Events, now
		checkpoint, age := sink.Checkpoint().Position.String(), lagAge(st, now)
		if term != nil {
			term.show(fmt.Sprintf("%s: %d events, %d/s, lag %d bytes %.1fs, checkpoint %s%s",
				st.State, st.Events, rate, st.LagBytes, age.Seconds(), checkpoint, backfillsLine(st.Backfills)))
			continue
		}
		logger.Info("progress", "events", st.Events, "events_per_second", rate, "checkpoint", checkpoint,
			"lag_seconds", age.Seconds(), "lag_bytes", st.LagBytes, "confirmed_lsn", st.Confirmed.String(), "state", st.State.String())
		logBackfills(logger, st.Backfills)
	}
}

// lagAge is how far behind the database Kafka is in time, at most: while
// WAL is pending (RunStats.LagBytes above zero), now minus the commit time
// of the newest change written, since the oldest pending change committed
// after it; zero when nothing is pending. While the published tables are
// idle and others are written, the pending WAL is theirs, and lagAge
// overstates the lag until the next confirmation passes it.
func lagAge(st pgcdc.RunStats, now time.Time) time.Duration {
	if st.LagBytes == 0 || st.LastCommit.IsZero() {
		return 0
	}
	return max(now.Sub(st.LastCommit), 0)
}
