package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// countingSink counts what Writes delivered, for the progress log. Write
// is called by one goroutine at a time (pgcdc.Run's writer); the counters
// are read by the progress goroutine.
type countingSink struct {
	pgcdc.Sink
	events     atomic.Int64
	lastCommit atomic.Int64 // Unix nanoseconds of the newest written event's commit
}

func (s *countingSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	s.events.Add(int64(len(b.Events)))
	if n := len(b.Events); n > 0 && !b.Events[n-1].Commit.IsZero() {
		s.lastCommit.Store(b.Events[n-1].Commit.UnixNano())
	}
	return nil
}

// reportProgress logs every interval: events per second since the last
// report, the lag in bytes (the server's current WAL position minus the
// slot's confirmed_flush_lsn: WAL the slot holds back and that is not in
// Kafka yet) and in seconds (now minus the commit time of the newest event
// written). The seconds grow while the published tables are idle; the
// bytes tell whether that is lag or quiet.
func reportProgress(ctx context.Context, logger *slog.Logger, connString, slot string, every time.Duration, s *countingSink) {
	t := time.NewTicker(every)
	defer t.Stop()
	var db *pgx.Conn
	defer func() {
		if db != nil {
			db.Close(context.Background())
		}
	}()
	last, lastAt := s.events.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		n := s.events.Load()
		rate := float64(n-last) / now.Sub(lastAt).Seconds()
		last, lastAt = n, now

		attrs := []any{"events", n, "events_per_second", int64(rate + 0.5), "checkpoint", s.Checkpoint().Position.String()}
		if c := s.lastCommit.Load(); c != 0 {
			attrs = append(attrs, "lag_seconds", now.Sub(time.Unix(0, c)).Seconds())
		}
		lag, confirmed, err := slotLag(ctx, &db, connString, slot)
		if err != nil {
			// The database may be restarting; Run reconnects on its
			// own, and so does the next report.
			attrs = append(attrs, "lag_error", err)
		} else {
			attrs = append(attrs, "lag_bytes", lag, "confirmed_flush_lsn", confirmed)
		}
		logger.Info("progress", attrs...)
	}
}

// slotLag returns pg_current_wal_lsn() minus the slot's
// confirmed_flush_lsn, and the latter, on *db, connecting when needed.
func slotLag(ctx context.Context, db **pgx.Conn, connString, slot string) (int64, string, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if *db == nil {
		cc, err := pgx.ParseConfig(connString)
		if err != nil {
			return 0, "", err
		}
		// The connection string may ask for a replication connection;
		// this query needs an ordinary one.
		delete(cc.RuntimeParams, "replication")
		cc.RuntimeParams["application_name"] = "kafkasink-progress"
		if *db, err = pgx.ConnectConfig(qctx, cc); err != nil {
			*db = nil
			return 0, "", err
		}
	}
	var lag *int64
	var confirmed *string
	err := (*db).QueryRow(qctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag, &confirmed)
	if err != nil {
		(*db).Close(context.Background())
		*db = nil
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, "", fmt.Errorf("slot %q does not exist yet", slot)
		}
		return 0, "", err
	}
	if lag == nil || confirmed == nil {
		return 0, "", fmt.Errorf("slot %q has no confirmed position yet", slot)
	}
	return *lag, *confirmed, nil
}
