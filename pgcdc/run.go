package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// ErrSlotLost is returned by Run when the replication slot disappeared
// while Run was using it: the changes it held back are gone, so streaming
// on from a new slot would leave a gap. Fatal; test with errors.Is.
var ErrSlotLost = errors.New("pgcdc: replication slot lost")

// Run streams the changes of cfg's publication from cfg's slot into sink
// until ctx ends or a fatal error occurs. It is the whole pipeline: it
// checks the server (wal_level must be logical), creates the publication
// and the slot when allowed, takes or resumes the initial snapshot when
// asked, then streams, batching whole transactions, and confirms an LSN to
// the server only after sink.Write returned nil for everything before it.
//
// Retryable errors (lost connections, a restarted server, a terminated
// walsender, a slot still held by a previous connection) make Run reconnect
// with exponential backoff and resume from the checkpoint; a retryable
// Write error makes it write the same batch again. Run returns the first
// fatal error: a *kafkasink.ConfigError (invalid cfg, wal_level, missing
// slot or publication), a *DecodeError, ErrSlotLost, an error of sink.Write
// that kafkasink.IsRetryable rejects (such as ErrFenced or a
// *kafkasink.RejectedError), or an error of the server that no retry can
// cure (such as missing privileges).
//
// When ctx ends, Run returns context.Cause(ctx) after the Write in progress
// has returned: that Write sees the cancelled ctx, so in ExactlyOnce mode
// its transaction is aborted, or committed if the commit was already under
// way, and never half visible. Run does not close sink.
//
// Run must be the only writer of sink; one Run per slot.
func Run(ctx context.Context, cfg Config, sink kafkasink.Sink) error {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if sink == nil {
		var ce *kafkasink.ConfigError
		if !errors.As(err, &ce) {
			ce = &kafkasink.ConfigError{}
			err = ce
		}
		ce.Problems = append(ce.Problems, "pgcdc: Run needs a sink: the sink argument is nil")
	}
	if err != nil {
		return err
	}
	r := &runner{cfg: &cfg, sink: sink, log: cfg.Logger.With("slot", cfg.Slot)}
	r.catalog = &catalog{cfg: r.cfg, log: r.log}
	defer r.catalog.close()
	if err := os.MkdirAll(cfg.spoolDir(), 0o700); err != nil {
		return fmt.Errorf("pgcdc: creating the spool directory (Config.SpoolDir): %w", err)
	}
	defer func() {
		if r.dec != nil {
			r.dec.Close()
		}
	}()

	if cfg.HeartbeatInterval > 0 {
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { r.heartbeats(hctx) })
		defer func() {
			stop()
			wg.Wait()
		}()
	}

	wait := cfg.ReconnectBackoff
	for {
		r.progress = false
		err := r.attempt(ctx)
		if ctx.Err() != nil {
			r.log.Info("stopped", "cause", context.Cause(ctx))
			return context.Cause(ctx)
		}
		if !retryable(err) {
			r.log.Error("stopped by a fatal error", "error", err)
			return err
		}
		if r.progress {
			wait = cfg.ReconnectBackoff
		}
		r.log.Warn("replication interrupted; reconnecting", "error", err, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, cfg.ReconnectMax)
	}
}

// runner is the state of one Run across reconnects.
type runner struct {
	cfg  *Config
	sink kafkasink.Sink
	log  *slog.Logger

	// ready is set once the server was checked and the publication and
	// slot exist; from then on a missing slot is ErrSlotLost.
	ready    bool
	protocol int
	dec      *Decoder
	session  *session
	catalog  *catalog
	// progress is set when an attempt received something from the
	// server, so the backoff starts over.
	progress bool
	// columns are the columns each table ("schema.table") is streamed
	// with, as far as this Run knows; see noteColumns.
	columns map[string][]string
}

// attempt connects, prepares, snapshots if needed, and streams until an
// error.
func (r *runner) attempt(ctx context.Context) error {
	cc, err := r.cfg.connConfig()
	if err != nil {
		return err
	}
	db, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("pgcdc: connecting: %w", err)
	}
	defer closeConn(db)

	var created *createdSlot
	defer func() {
		if created != nil {
			closePgConn(created.conn)
		}
	}()
	if !r.ready {
		version, err := checkServer(ctx, db)
		if err != nil {
			return err
		}
		if err := ensurePublication(ctx, db, r.cfg); err != nil {
			return err
		}
		if err := warnPartialRows(ctx, db, r.cfg.Publication, r.log); err != nil {
			return err
		}
		st, err := readSlot(ctx, db, r.cfg.Slot)
		if err != nil {
			return err
		}
		// A table the snapshot cannot read is refused before the slot
		// exists: a slot left behind would hold WAL.
		if err := r.checkSnapshot(ctx, db, !st.exists); err != nil {
			return err
		}
		if !st.exists {
			if !r.cfg.CreateSlot {
				return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
					"pgcdc: replication slot %q does not exist: create it (SELECT pg_create_logical_replication_slot('%s', 'pgoutput')) or set Config.CreateSlot",
					r.cfg.Slot, r.cfg.Slot)}}
			}
			if created, err = createSlot(ctx, r.cfg, r.cfg.Snapshot); err != nil {
				return err
			}
		}
		r.protocol = 2
		if version < 140000 {
			// Streaming of in-progress transactions and logical
			// decoding messages came with PostgreSQL 14.
			r.protocol = 1
		}
		if r.dec, err = NewDecoder(DecoderConfig{
			ProtocolVersion: r.protocol,
			SpoolDir:        r.cfg.spoolDir(),
			KeyColumns:      r.cfg.KeyColumns,
			OnEvent:         func(e kafkasink.Event) error { return r.session.onEvent(e) },
			OnCommit:        func(t Txn) error { return r.session.onCommit(t) },
			OnMessage:       func(m Message) error { return r.session.onMessage(m) },
			OnRelation: func(schema, table string, columns []string) {
				r.noteColumns(schema, table, columns, "Relation message")
			},
		}); err != nil {
			return err
		}
		r.dec.fallbackKey = func(oid uint32, schema, table string, columns []string) ([]string, error) {
			return r.catalog.streamKey(r.session.ctx, oid, schema, table, columns)
		}
		r.dec.conv.describe = func(oid uint32) (customType, bool, error) {
			return r.catalog.streamType(r.session.ctx, oid)
		}
		r.dec.conv.liveCatalog = true
		r.ready = true
		r.log.Info("server ready", "server_version_num", version, "publication", r.cfg.Publication)
	}

	slot, err := readSlot(ctx, db, r.cfg.Slot)
	if err != nil {
		return err
	}
	if !slot.exists {
		return fmt.Errorf("%w: slot %q no longer exists; changes since the last confirmed position are gone: take a new snapshot into a new sink, or accept the gap by letting Run create the slot again with a new Run", ErrSlotLost, r.cfg.Slot)
	}
	if err := r.snapshot(ctx, db, slot, created); err != nil {
		return err
	}
	if created != nil {
		// The exported snapshot is no longer needed.
		closePgConn(created.conn)
		created = nil
	}
	// The ordinary connection is not needed while streaming.
	closeConn(db)
	return r.stream(ctx, slot)
}

// retryable reports whether Run should reconnect after err rather than
// return it.
func retryable(err error) bool {
	if err == nil {
		return true
	}
	var de *DecodeError
	var se *sinkError
	if errors.As(err, &de) || errors.As(err, &se) || errors.Is(err, ErrSlotLost) || kafkasink.IsFatal(err) {
		return false
	}
	if _, ok := kafkasink.IsRejected(err); ok {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"), // insufficient resources, such as too many connections
			strings.HasPrefix(pe.Code, "40"), // serialization failure, deadlock
			pe.Code == "57P01",               // admin_shutdown: pg_terminate_backend, a fast shutdown
			pe.Code == "57P02",               // crash_shutdown
			pe.Code == "57P03",               // cannot_connect_now: starting up or in recovery
			pe.Code == "57014",               // query_canceled: pg_cancel_backend, statement_timeout
			pe.Code == "55006":               // object_in_use: the slot is still active for a previous walsender
			return true
		}
		return false
	}
	// Everything else is the network or the connection: refused, reset,
	// closed, timed out.
	return true
}

// heartbeats emits a logical decoding message every HeartbeatInterval on
// its own connection until ctx ends. Failures are logged and retried at the
// next tick: a heartbeat is an optimisation, never a reason to stop.
func (r *runner) heartbeats(ctx context.Context) {
	t := time.NewTicker(r.cfg.HeartbeatInterval)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if conn == nil {
			cc, err := r.cfg.connConfig()
			if err != nil {
				return
			}
			if conn, err = pgx.ConnectConfig(ctx, cc); err != nil {
				r.log.Debug("heartbeat connection failed", "error", err)
				conn = nil
				continue
			}
		}
		if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(false, '"+heartbeatPrefix+"', '')"); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("heartbeat failed", "error", err)
			}
			closeConn(conn)
			conn = nil
		}
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Close(ctx)
}

func closePgConn(c *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Close(ctx)
}
