package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPrefix is the logical decoding message prefix Emit writes with,
// and the one pgcdc's Config.Outbox reads by default.
const DefaultPrefix = "kafkasink.outbox"

// emitSQL writes a transactional logical decoding message: it is part of
// the transaction, decoded at its commit in order with its row changes,
// and never decoded when the transaction rolls back.
const emitSQL = "SELECT pg_logical_emit_message(true, $1::text, $2::bytea)"

// PgxExecer is the method Emit uses of a pgx transaction: pgx.Tx has it.
type PgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pgxTx is a pgx transaction (pgx.Tx, pgxpool's), whose connection tells
// whether the transaction is open.
type pgxTx interface {
	PgxExecer
	Conn() *pgx.Conn
}

// SQLExecer is the method Emit uses of a database/sql transaction: *sql.Tx
// has it (with pgx's stdlib driver, or any PostgreSQL driver).
type SQLExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Emitter emits messages with settings other than the defaults. The zero
// Emitter is Emit's. An Emitter is a plain value, safe for concurrent use.
type Emitter struct {
	// Prefix is the logical decoding message prefix; "" means
	// DefaultPrefix. The pipeline must read the same one (pgcdc's
	// Config.Outbox.Prefix, the program's -outbox-prefix).
	Prefix string
	// MaxBytes is the largest size of key, value and header names and
	// values together; 0 means DefaultMaxBytes. Raise it only with the
	// topic's max.message.bytes and the sink's Config.MaxRecordBytes.
	MaxBytes int
}

// Emit writes m inside tx with the default Emitter: see Emitter.Emit.
func Emit(ctx context.Context, tx any, m Message) error {
	return Emitter{}.Emit(ctx, tx, m)
}

// Emit writes m inside tx, a pgx.Tx or a *sql.Tx (anything with
// PgxExecer's or SQLExecer's method), with pg_logical_emit_message: the
// pipeline delivers it to m.Topic once tx commits, exactly once, in
// commit order with tx's row changes and in the same Kafka transaction
// as them when they fit in one (see pgcdc.Outbox). If tx rolls back, the
// message never existed.
//
// A message that breaks a rule of Message or exceeds MaxBytes is refused
// here, before anything is written, with a *MessageError; tx is
// untouched and may go on. An error from the database is returned
// wrapped; as with any failed statement, PostgreSQL then aborts tx.
//
// tx must be a transaction: a *sql.DB, a *pgx.Conn outside BEGIN, or
// anything else with pgx's Exec but no pgx.Tx (a *pgxpool.Pool) could
// commit the message on its own at once, so they are refused.
func (em Emitter) Emit(ctx context.Context, tx any, m Message) error {
	maxBytes := em.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	content, err := marshal(m, maxBytes)
	if err != nil {
		return err
	}
	prefix := em.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	switch x := tx.(type) {
	case *sql.DB:
		return fmt.Errorf("outbox: Emit got a *sql.DB, which would commit the message on its own: pass the *sql.Tx of the transaction it belongs to (db.BeginTx)")
	case *pgx.Conn:
		if x.PgConn().TxStatus() != 'T' {
			return fmt.Errorf("outbox: Emit got a *pgx.Conn outside a transaction, which would commit the message on its own: pass the pgx.Tx of the transaction it belongs to (conn.Begin)")
		}
		_, err = x.Exec(ctx, emitSQL, prefix, content)
	case pgxTx:
		if x.Conn().PgConn().TxStatus() != 'T' {
			return fmt.Errorf("outbox: Emit got a %T whose transaction has ended: emit before Commit", tx)
		}
		_, err = x.Exec(ctx, emitSQL, prefix, content)
	case PgxExecer:
		// Such as a *pgxpool.Pool: no way to know it is in a transaction.
		return fmt.Errorf("outbox: Emit got a %T, which is not a transaction and may commit the message on its own: pass the pgx.Tx of the transaction it belongs to (Begin)", tx)
	case SQLExecer:
		_, err = x.ExecContext(ctx, emitSQL, prefix, content)
	default:
		return fmt.Errorf("outbox: Emit got a %T: pass a pgx.Tx or a *sql.Tx", tx)
	}
	if err != nil {
		return fmt.Errorf("outbox: emitting a message for topic %q: %w", m.Topic, err)
	}
	return nil
}
