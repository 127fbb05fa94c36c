package pgcdc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// This file reads Debezium's signal table (Config.SignalTable), for users
// who bring their Debezium setup: a row inserted into it reaches Run
// through the stream, as any change of a published table, and its id,
// type and data are taken as a signal, the same signal a logical message
// with Config.SignalPrefix carries (backfill_signal.go). Run itself still
// writes nothing to the database, and reads the table only through the
// stream.

// signalTable is the signal table Run found in the publication at
// start-up; the zero value is no signal table.
type signalTable struct {
	schema, table string
}

// checkSignalTable checks, when cfg names a signal table, that the
// publication streams it with Debezium's three columns, so that rows
// inserted into it reach Run, and returns it. A table the publication
// does not stream is a *kafkasink.ConfigError, not a silence: its signals
// would never arrive.
func checkSignalTable(ctx context.Context, q querier, cfg *Config) (signalTable, error) {
	if cfg.SignalTable == "" {
		return signalTable{}, nil
	}
	schema, table, _ := splitTable(cfg.SignalTable) // validated
	name := schema + "." + table
	published, err := publishedTables(ctx, q, cfg.Publication)
	if err != nil {
		return signalTable{}, err
	}
	refuse := func(format string, args ...any) (signalTable, error) {
		return signalTable{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf("pgcdc: Config.SignalTable %q: ", cfg.SignalTable) + fmt.Sprintf(format, args...)}}
	}
	i := slices.IndexFunc(published, func(p publishedTable) bool { return p.schema == schema && p.table == table })
	if i < 0 {
		var exists bool
		if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qualified(schema, table)).Scan(&exists); err != nil {
			return signalTable{}, fmt.Errorf("pgcdc: looking up the signal table %s: %w", name, err)
		}
		if !exists {
			return refuse("no such table: create it as Debezium's signal table, "+
				"CREATE TABLE %s (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048) NULL), "+
				"and add it to the publication", qualified(schema, table))
		}
		return refuse("the table is not in publication %q, so the rows inserted into it never reach Run: "+
			"ALTER PUBLICATION %s ADD TABLE %s (or, when Run creates the publication, add it to Config.Tables)",
			cfg.Publication, pgx.Identifier{cfg.Publication}.Sanitize(), qualified(schema, table))
	}
	p := published[i]
	if len(p.columns) != 3 {
		return refuse("publication %q streams its columns %q; Debezium's signal table has three, id, type and data, "+
			"read by their position as Debezium reads them: give the table (and the publication's column list) exactly three", cfg.Publication, p.columns)
	}
	var notText []string
	rows, err := q.Query(ctx, `SELECT a.attname::text
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1::regclass AND a.attname = ANY ($2) AND t.typcategory <> 'S'`, qualified(schema, table), p.columns)
	if err == nil {
		notText, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return signalTable{}, fmt.Errorf("pgcdc: reading the column types of the signal table %s: %w", name, err)
	}
	if len(notText) > 0 {
		return refuse("columns %q are not of a string type; Debezium's signal table has id, type and data as text (varchar)", notText)
	}
	return signalTable{schema: schema, table: table}, nil
}

// signalRow notes a row inserted into the signal table: its signal is
// taken at its transaction's commit, in order with the stream, as a
// transactional signal message's is, and not at all if the transaction
// rolls back. As Debezium does, only inserts are signals (updates and
// deletes of the table are not), and the row's first three columns are
// its id, type and data, whatever their names. The row's own change event
// is delivered like any change of a published table: the publication,
// not Run, decides what reaches Kafka, and Debezium delivers it too when
// it captures the table.
func (b *backfiller) signalRow(e *kafkasink.Event) {
	st := b.r.signal
	if e.Op != kafkasink.OpInsert || st.table == "" || e.Table != st.table || e.Schema != st.schema {
		return
	}
	if len(e.After) >= 2 && slices.Contains(debeziumWindowSignals, e.After[1].Value) {
		return
	}
	b.pending = append(b.pending, pendingSignal{xid: e.XID, lsn: e.LSN, content: signalRowJSON(e.After)})
}

// debeziumWindowSignals are the rows a Debezium sharing the signal table
// inserts into it itself, to open and close the windows of its own
// incremental snapshot's chunks (its default watermarking): Debezium's
// bookkeeping, not a request of anyone's, so Run passes them over
// without a warning.
var debeziumWindowSignals = []any{"snapshot-window-open", "snapshot-window-close"}

// signalRowJSON is the signal a signal table's row carries, as the JSON
// parseSignal reads: its first three columns as id, type and data (data
// stays a JSON string, as the table stores it, which parseSignal
// unwraps). checkSignalTable made sure at start-up that they are text; a
// value that is not (the table was altered since) is left out, and
// parseSignal refuses the signal for what is missing.
func signalRowJSON(row kafkasink.Row) []byte {
	text := func(i int) (string, bool) {
		if i >= len(row) {
			return "", false
		}
		s, ok := row[i].Value.(string)
		return s, ok
	}
	var s signal
	s.ID, _ = text(0)
	s.Type, _ = text(1)
	if data, ok := text(2); ok {
		s.Data, _ = json.Marshal(data) // a string always marshals
	}
	content, _ := json.Marshal(s) // strings and a marshalled string: it cannot fail
	return content
}
