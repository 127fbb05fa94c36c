package pgcdc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// primaryKey returns the primary key columns of the table with OID rel in
// key order, or nil when the table has none.
func primaryKey(ctx context.Context, q querier, rel uint32) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT a.attname
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1::oid AND i.indisprimary
		ORDER BY k.ord`, rel)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return names, nil
}

// keyLookup finds the key of tables whose replica identity does not name
// their rows (FULL, NOTHING, DEFAULT without a primary key) and that
// Config.KeyColumns leaves alone, for the snapshot and the stream alike,
// so that both give a row the same Kafka key.
type keyLookup struct {
	cfg *Config
	log *slog.Logger

	mu     sync.Mutex
	warned map[string]bool // tables whose fallback to event ids was logged
	conn   *pgx.Conn       // for the stream's lookups, opened when first needed
}

// key returns the primary key of the table with OID rel and the given columns (those
// the snapshot reads or pgoutput sends), looked up on q. Without a primary
// key, or with a primary key column among neither, it returns nil: the
// table's events are then keyed by their event id, which keeps no order
// per row and which compaction never removes, and that is logged once per
// table.
func (k *keyLookup) key(ctx context.Context, q querier, rel uint32, schema, name string, columns []string) ([]string, error) {
	pk, err := primaryKey(ctx, q, rel)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: looking up the primary key of %s.%s: %w", schema, name, err)
	}
	reason := "it has no primary key"
	for _, c := range pk {
		if !slices.Contains(columns, c) {
			reason = fmt.Sprintf("its primary key column %q is not published", c)
			pk = nil
			break
		}
	}
	if pk != nil {
		return pk, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	qualified := schema + "." + name
	if !k.warned[qualified] {
		if k.warned == nil {
			k.warned = make(map[string]bool)
		}
		k.warned[qualified] = true
		k.log.Warn("table has no key: its records are keyed by event id, so they keep no per-row order and compaction never removes them; "+
			"give it a primary key, REPLICA IDENTITY USING INDEX, or key columns (Config.KeyColumns, program flag -key-columns)",
			"table", qualified, "reason", reason)
	}
	return nil, nil
}

// streamKey is key for a Relation message: the table by its OID, looked up
// on a connection of the lookup's own, since the replication connection is
// busy streaming. The connection stays open for the next lookup; an error
// closes it.
func (k *keyLookup) streamKey(ctx context.Context, oid uint32, schema, name string, columns []string) ([]string, error) {
	if k.conn == nil {
		cc, err := k.cfg.connConfig()
		if err != nil {
			return nil, err
		}
		if k.conn, err = pgx.ConnectConfig(ctx, cc); err != nil {
			k.conn = nil
			return nil, fmt.Errorf("pgcdc: connecting to look up the primary key of %s.%s: %w", schema, name, err)
		}
	}
	key, err := k.key(ctx, k.conn, oid, schema, name, columns)
	if err != nil {
		k.close()
	}
	return key, err
}

// close closes the stream's lookup connection, if open.
func (k *keyLookup) close() {
	if k.conn != nil {
		closeConn(k.conn)
		k.conn = nil
	}
}
