package pgcdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// heartbeatPrefix is the prefix of the logical decoding messages Run emits
// as heartbeats.
const heartbeatPrefix = "kafkasink.heartbeat"

// batch is what the pump hands to the writer: events for one Write, and
// the LSN the server may be told once they are in Kafka.
type batch struct {
	events []kafkasink.Event
	// bytes is the memory the batch holds, as add counts it: the room of
	// events and what each event holds outside it (Config.BatchMaxBytes).
	bytes int
	// confirm is the highest LSN before which every transaction is in
	// this batch or an earlier one: the end of the last transaction that
	// ends in the batch, or a heartbeat's or keepalive's LSN seen between
	// transactions. Zero when no transaction ends in the batch, as in the
	// middle part of a split transaction.
	confirm kafkasink.LSN
	// commitEnd is the end of the commit record of the last transaction
	// that ends in the batch, zero when none does; the cursor records it
	// (cursor.LastCommitEnd) once the batch is written.
	commitEnd kafkasink.LSN
	// due is set when the batch may be written: when it has waited
	// BatchMaxWait, or as soon as it has content when BatchMaxWait is
	// zero. A due batch goes to the writer the moment the writer is free.
	due bool
	// backfills, when set, is what the batch's Write records of the
	// backfills: they changed with the batch. chunk says the batch is a
	// backfill chunk (see session.backfillChunk).
	backfills *backfillState
	chunk     bool
}

func (b *batch) empty() bool { return len(b.events) == 0 && b.confirm == 0 && b.backfills == nil }

// session is one replication connection's stream, from START_REPLICATION
// until an error or cancellation.
//
// Three goroutines share the work, so that a slow Write never silences the
// connection and wal_sender_timeout never fires:
//
//   - receive only reads the connection and passes raw messages on,
//     through an inbox;
//   - the pump (the caller of run) decodes them, builds batches, hands
//     them to the writer, and is the only one to write to the connection:
//     it answers keepalives and sends standby status every
//     StandbyInterval, also while it waits for the writer;
//   - the writer calls sink.Write for one batch at a time and publishes the
//     confirmable LSN once a Write returned nil.
//
// Reading stops while a full batch waits for the writer, so memory stays
// bounded by about two batches and the server is held back by TCP flow
// control rather than by a silent client.
type session struct {
	cfg  *Config
	sink Sink
	dec  *Decoder
	conn *pgconn.PgConn
	log  *slog.Logger
	in   *inbox // receive → pump

	ctx     context.Context // the pump's context: the session ends with it
	msgs    [][]byte        // the messages last taken from the inbox, reused
	cur     *batch
	timer   *time.Timer
	armed   bool
	standby *time.Ticker

	batches chan *batch // pump → writer, unbuffered
	// written is the highest confirmable LSN of a written batch, which
	// the writer alone raises (publish) and the pump reports.
	written atomic.Uint64
	wrote   chan struct{} // writer → pump: a batch was written (capacity 1)
	werr    chan error    // writer → pump: the writer stopped (capacity 1)

	// confirmed is the flush LSN last reported to the server, at the
	// start the slot's confirmed position; told alone changes it.
	confirmed kafkasink.LSN
	database  string // Event.Source.Database of every event
	// phase is the runner's, which a message arriving moves to
	// runnerReceived; nil outside Run.
	phase *runnerPhase

	// ck is the runner's, which the writer alone uses during the
	// session: each Write records in its cursor the LSN the batch lets
	// the loop confirm, before the loop confirms it.
	ck *checkpointer
	// checkpointed is when the writer last wrote a checkpoint; a
	// cursor-only Write waits Config.tick after it.
	checkpointed time.Time
	// bf runs the backfills between the stream's transactions; nil
	// outside Run.
	bf *backfiller
	// router routes outbox tables' rows (Config.EventRouter); nil
	// without it.
	router *eventRouter
}

// stream runs one replication session from start and returns why it ended.
func (r *runner) stream(ctx context.Context, slot slotState) error {
	conn, err := r.cfg.connectReplication(ctx)
	if err != nil {
		return err
	}
	defer closeConn(conn)

	// Start from the later of the slot's confirmed position and the sink's
	// checkpoint: transactions committed before either are in Kafka. The
	// checkpoint's LSN is a commit LSN, so its transaction is sent again
	// and the sink skips what it already has.
	start := max(slot.confirmed, r.sink.Checkpoint().Position.LSN)
	if err := pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, pglogrepl.LSN(start),
		pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: r.pluginArgs()}); err != nil {
		return fmt.Errorf("pgcdc: starting replication from slot %q at %s: %w", r.cfg.Slot, start, err)
	}
	r.log.Info("replication started", "start", start.String(), "slot_confirmed", slot.confirmed.String(), "protocol", r.protocol)
	r.cfg.Monitor.setState(RunStreaming)

	s := &session{
		cfg: r.cfg, sink: r.sink, conn: conn, log: r.log, in: newInbox(),
		ctx:      ctx,
		cur:      &batch{},
		timer:    time.NewTimer(time.Hour),
		standby:  time.NewTicker(r.cfg.StandbyInterval),
		batches:  make(chan *batch),
		wrote:    make(chan struct{}, 1),
		werr:     make(chan error, 1),
		ck:       &r.ck,
		database: r.database,
		phase:    &r.phase,
		bf:       r.bf,
		router:   r.cfg.EventRouter.ready(),
	}
	s.timer.Stop()
	r.bf.begin(s)
	defer r.bf.end()
	defer s.standby.Stop()
	s.told(slot.confirmed)
	if s.dec, err = r.newDecoder(s); err != nil {
		return err
	}
	defer func() {
		// The server sends the open transactions again to the next
		// session, streamed ones from their first segment.
		if err := s.dec.Close(); err != nil {
			r.log.Warn("removing spool files", "error", err)
		}
	}()
	return s.run()
}

// newDecoder returns the decoder of session s, built as any user builds
// one: its callbacks are s's, and its Catalog asks Run's catalog under the
// session's context.
func (r *runner) newDecoder(s *session) (*Decoder, error) {
	dec, err := pgoutput.NewDecoder(DecoderConfig{
		ProtocolVersion: r.protocol,
		SpoolDir:        r.spool.path,
		SpoolMaxBytes:   r.cfg.SpoolMaxBytes,
		KeyColumns:      r.cfg.KeyColumns,
		OnEvent:         s.onEvent,
		OnCommit:        s.onCommit,
		OnMessage:       s.onMessage,
		IndexMessage:    r.cfg.Outbox.indexes(),
		Counted:         counted(r.sink),
		Captures:        r.filter.captures(),
		OnRelation: func(schema, table string, columns []string) {
			r.noteColumns(schema, table, columns, "Relation message")
			r.bf.relation(schema, table)
		},
		KeylessTables: r.cfg.KeylessTables,
		// The first transaction of the session follows the last one
		// written, on an earlier connection or by an earlier Run.
		PrevCommitEnd: kafkasink.LSN(r.ck.cur.LastCommitEnd),
		Catalog:       sessionCatalog{ctx: s.ctx, k: r.catalog},
	})
	if err != nil {
		return nil, err
	}
	r.cfg.Monitor.watchSpool(dec)
	return dec, nil
}

// counted is DecoderConfig.Counted for sink: its Delivers method, when it
// has one, so that Event.Txn counts what the sink writes.
func counted(sink Sink) func(*kafkasink.Event) bool {
	if d, ok := sink.(interface{ Delivers(*kafkasink.Event) bool }); ok {
		return d.Delivers
	}
	return nil
}

// pluginArgs are pgoutput's options: protocol 2 with streamed in-progress
// transactions and logical decoding messages (for heartbeats) from
// PostgreSQL 14 on, protocol 1 before.
func (r *runner) pluginArgs() []string {
	pubs := "publication_names '" + strings.ReplaceAll(pgx.Identifier{r.cfg.Publication}.Sanitize(), "'", "''") + "'"
	if r.protocol == 1 {
		return []string{"proto_version '1'", pubs}
	}
	return []string{"proto_version '2'", pubs, "messages 'true'", "streaming 'on'"}
}

// run is the pump: it starts the receiver and the writer, then decodes,
// batches and reports status until the session ends.
func (s *session) run() error {
	ctx := s.ctx
	sctx, cancel := context.WithCancel(ctx)
	recvErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.receive(sctx.Done(), recvErr) })
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writer(ctx, sctx)
	}()
	defer func() {
		// The writer finishes the Write it is in, with ctx: cancelling
		// ctx aborts it cleanly, and a lost replication connection
		// does not. Then the receiver stops and the caller may close
		// the connection.
		cancel()
		// The receiver reads without a context (see receive): a past
		// deadline ends its read.
		s.conn.Conn().SetReadDeadline(time.Now())
		close(s.batches)
		<-writerDone
		wg.Wait()
		s.timer.Stop()
	}()

	for {
		if err := s.backfillStep(); err != nil {
			return err
		}
		in, out := s.in.ready, chan *batch(nil)
		switch {
		case s.full():
			in, out = nil, s.batches
		case s.cur.due:
			out = s.batches
		}
		var timerC <-chan time.Time
		if s.armed {
			timerC = s.timer.C
		}
		if _, err := s.wait(in, out, timerC, recvErr); err != nil {
			return err
		}
	}
}

// wait waits for the first thing the pump must act on and acts on it:
// messages in the inbox (in), the writer taking the current batch (out),
// the batch's wait ending (timerC), the receiver failing (recvErr), and,
// whatever else the pump waits for, the standby interval, a written batch
// to confirm, the writer failing and the end of the session's context. A
// nil channel is not waited for: handoff, which runs inside the handling
// of a message, waits for the writer alone besides what every wait
// answers. handed reports that the writer took the current batch.
func (s *session) wait(in <-chan struct{}, out chan<- *batch, timerC <-chan time.Time, recvErr <-chan error) (handed bool, err error) {
	select {
	case <-in:
		s.msgs = s.in.take(s.msgs)
		for _, data := range s.msgs {
			if err := s.handle(data); err != nil {
				return false, err
			}
			// Between two transactions, a backfill chunk may run.
			if err := s.backfillStep(); err != nil {
				return false, err
			}
		}
	case out <- s.cur:
		s.next()
		return true, nil
	case <-timerC:
		s.armed = false
		s.cur.due = true
	case <-s.standby.C:
		return false, s.sendStatus(false)
	case <-s.wrote:
		return false, s.sendStatus(true)
	case <-s.backfillWake():
		// The run loop looks at the backfills again.
	case err := <-recvErr:
		return false, err
	case err := <-s.werr:
		return false, err
	case <-s.ctx.Done():
		return false, context.Cause(s.ctx)
	}
	return false, nil
}

// receive reads the connection into the inbox until the read fails or done
// closes. It reads without a context: pgconn sets up a watcher for a
// context on every call, which cost more than the read; the session ends a
// read with a deadline instead.
func (s *session) receive(done <-chan struct{}, errc chan<- error) {
	for {
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			select {
			case <-done: // the session ended it
			default:
				errc <- fmt.Errorf("pgcdc: receiving from replication slot %q: %w", s.cfg.Slot, err)
			}
			return
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if !s.in.put(m.Data, done) {
				return
			}
		case *pgproto3.ErrorResponse:
			errc <- fmt.Errorf("pgcdc: replication slot %q: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(m))
			return
		case *pgproto3.CopyDone:
			errc <- fmt.Errorf("pgcdc: the server ended replication from slot %q: %w", s.cfg.Slot, errStreamEnded)
			return
		}
	}
}

// errStreamEnded is the cause of a replication stream the server closed
// without an error, as it does when shutting down; Run reconnects.
var errStreamEnded = errors.New("replication stream ended")

// handle processes one CopyData message of the replication stream.
func (s *session) handle(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if s.phase != nil {
		s.phase.receives()
	}
	switch data[0] {
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return &DecodeError{Err: err}
		}
		s.cfg.Monitor.serverWALEnd(uint64(x.ServerWALEnd))
		return s.dec.Decode(kafkasink.LSN(x.WALStart), x.WALData)
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return &DecodeError{Err: err}
		}
		s.cfg.Monitor.serverWALEnd(uint64(k.ServerWALEnd))
		// The server has sent every transaction that commits before
		// WALEnd, except one it is still streaming: between
		// transactions, WALEnd may be confirmed once what came before
		// it is written. This is what moves an idle slot.
		if !s.dec.InTransaction() {
			s.advance(kafkasink.LSN(k.ServerWALEnd))
		}
		if k.ReplyRequested {
			return s.sendStatus(false)
		}
	}
	return nil
}

// onEvent is the decoder's OnEvent: the event joins the current batch,
// which is handed over first if it is full. Handing over may wait for the
// writer; the pump keeps sending standby status meanwhile.
func (s *session) onEvent(e kafkasink.Event) error {
	if s.router != nil {
		if keep, err := s.routeEvent(&e); !keep {
			return err
		}
	}
	if s.full() {
		if err := s.handoff(); err != nil {
			return err
		}
	}
	e.Source.Database = s.database
	if s.bf != nil {
		s.bf.observe(&e)
	}
	s.cur.add(e)
	s.arm()
	return nil
}

// onCommit is the decoder's OnCommit: the transaction is complete, so its
// end may be confirmed once this batch is written.
func (s *session) onCommit(t Txn) error {
	s.cur.commitEnd = t.EndLSN
	s.advance(t.EndLSN)
	if s.bf != nil {
		s.backfillCommit(t)
	}
	return nil
}

// onMessage is the decoder's OnMessage. A heartbeat between transactions
// is a point before which everything received is in this batch or an
// earlier one.
// A backfill signal (Config.SignalPrefix) goes to the backfills, an
// outbox message (Config.Outbox) to the batch as an event.
func (s *session) onMessage(m Message) error {
	if m.Prefix == heartbeatPrefix && !m.Transactional && !s.dec.InTransaction() {
		s.advance(m.LSN)
	}
	if s.cfg.Outbox != nil && m.Prefix == s.cfg.Outbox.prefix() {
		return s.outboxMessage(m)
	}
	if s.bf != nil && s.cfg.SignalPrefix != "" && m.Prefix == s.cfg.SignalPrefix {
		s.backfillMessage(m)
	}
	return nil
}

// advance raises the current batch's confirmable LSN.
func (s *session) advance(lsn kafkasink.LSN) {
	if lsn > s.cur.confirm && lsn > kafkasink.LSN(s.written.Load()) {
		s.cur.confirm = lsn
		s.arm()
	}
}

// arm starts the batch's wait when it gets its first content.
func (s *session) arm() {
	switch {
	case s.armed || s.cur.due:
	case s.cfg.BatchMaxWait == 0:
		s.cur.due = true
	default:
		s.timer.Reset(s.cfg.BatchMaxWait)
		s.armed = true
	}
}

func (s *session) full() bool {
	return len(s.cur.events) >= s.cfg.BatchMaxEvents || s.cur.bytes >= s.cfg.BatchMaxBytes
}

// next starts a new batch after the current one was handed over.
//
// The new batch's events start with room for as many as the last batch
// had: under load batches are full, and growing a slice of 10000 events
// by doubling cost the pump as much as decoding them.
//
// The room is counted in the batch's bytes from the start: it is memory
// the batch holds, filled or not. It is at most half of BatchMaxBytes, so
// that a batch has room for its events' values.
func (s *session) next() {
	room := min(max(64, len(s.cur.events)), max(1, s.cfg.BatchMaxBytes/(2*eventBytes)))
	s.cur = &batch{events: make([]kafkasink.Event, 0, room), bytes: room * eventBytes}
	s.timer.Stop()
	s.armed = false
}

// handoff gives the current batch to the writer, waiting for it while
// still reporting status to the server.
func (s *session) handoff() error {
	for {
		if handed, err := s.wait(nil, s.batches, nil, nil); handed || err != nil {
			return err
		}
	}
}

// sendStatus reports the confirmed position: the highest LSN before which
// every transaction is in Kafka. onlyNew skips the message when that has
// not moved.
func (s *session) sendStatus(onlyNew bool) error {
	lsn := max(s.confirmed, kafkasink.LSN(s.written.Load()))
	if onlyNew && lsn == s.confirmed {
		return nil
	}
	// Write and apply positions are reported as the flush position:
	// nothing is applied anywhere before Kafka has it. The message goes
	// straight to the network connection, which is safe for concurrent
	// writes, not through pgconn's write buffer, as
	// pglogrepl.SendStandbyStatusUpdate sends it: when a read of the
	// receiver's goroutine fails, pgconn closes the connection from
	// another goroutine, sending Terminate through that buffer, which
	// raced with this message (the race detector saw it in
	// TestBackfillResumesAfterPostgresSIGKILL).
	if _, err := s.conn.Conn().Write(standbyStatus(lsn, time.Now())); err != nil {
		return fmt.Errorf("pgcdc: sending standby status to slot %q: %w", s.cfg.Slot, err)
	}
	if lsn != s.confirmed {
		s.log.Debug("confirmed flush position", "lsn", lsn.String())
	}
	s.told(lsn)
	return nil
}

// pgEpoch is the origin of PostgreSQL's timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// standbyStatus encodes a Standby Status Update (PostgreSQL's streaming
// replication protocol) reporting lsn as written, flushed and applied at
// now, in its CopyData message, without asking for a reply.
func standbyStatus(lsn kafkasink.LSN, now time.Time) []byte {
	data := make([]byte, 0, 34)
	data = append(data, pglogrepl.StandbyStatusUpdateByteID)
	for range 3 {
		data = binary.BigEndian.AppendUint64(data, uint64(lsn))
	}
	data = binary.BigEndian.AppendUint64(data, uint64(now.Sub(pgEpoch).Microseconds()))
	data = append(data, 0)
	b, _ := (&pgproto3.CopyData{Data: data}).Encode(nil) // fails only above 1 GB
	return b
}

// told makes lsn the position the server was told is confirmed, and the
// Monitor's RunStats.Confirmed.
func (s *session) told(lsn kafkasink.LSN) {
	s.confirmed = lsn
	s.cfg.Monitor.confirm(lsn)
}
