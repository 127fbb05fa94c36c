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
	return indexColumns(ctx, q, rel, true)
}

// indexColumns returns the columns of the primary key (primary) or of the
// replica identity index (REPLICA IDENTITY USING INDEX) of the table with
// OID rel in the index's order (pg_index.indkey), or nil when the table
// has no such index.
func indexColumns(ctx context.Context, q querier, rel uint32, primary bool) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT a.attname
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1::oid AND CASE WHEN $2 THEN i.indisprimary ELSE i.indisreplident END
		ORDER BY k.ord`, rel, primary)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return names, nil
}

// catalog answers what pgoutput does not say, for the snapshot and the
// stream alike so that both convert and key a row the same way: the key of
// tables whose replica identity does not name their rows (FULL, NOTHING,
// DEFAULT without a primary key) and that Config.KeyColumns leaves alone,
// and what domains, arrays and composites are made of. The snapshot asks
// on its own transaction; the stream on a connection of the catalog's own,
// since the replication connection is busy streaming. That connection is
// opened when first needed and stays open for the next question; an error
// closes it. Only the stream's goroutine uses it.
type catalog struct {
	cfg *Config
	log *slog.Logger

	mu     sync.Mutex
	warned map[string]bool // tables whose fallback to event ids was logged
	conn   *pgx.Conn
}

// key returns the primary key of the table with OID rel, looked up on q.
// columns are the table's columns the snapshot reads or pgoutput sends.
// Without a primary key, or when a primary key column is not among
// columns (a publication's column list left it out), it returns nil: the
// table's events are then keyed by their event id, which keeps no order
// per row and which compaction never removes, or have a null key under
// Config.KeylessTables; that is logged once per table.
func (k *catalog) key(ctx context.Context, q querier, rel uint32, schema, name string, columns []string) ([]string, error) {
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
		if k.cfg.KeylessTables {
			k.log.Info("table has no key: its records have a null key, in partition 0 (Config.KeylessTables)",
				"table", qualified, "reason", reason)
		} else {
			k.log.Warn("table has no key: its records are keyed by event id",
				"table", qualified, "reason", reason,
				"effect", "a row's changes go to different partitions, unordered, and compaction never removes a deleted row",
				"fix", "give it a primary key, REPLICA IDENTITY USING INDEX, or key columns (Config.KeyColumns, program flag -key-columns); "+
					"or write it with null keys as Debezium does (Config.KeylessTables, -keyless-tables)")
		}
	}
	return nil, nil
}

// columnDefault is the SQL, over pg_attribute a LEFT JOIN pg_attrdef d,
// of a column's DEFAULT expression as ColumnInfo.Default holds it: ""
// when it has none, and for a generated column (whose pg_attrdef row is
// its generation expression, not a default).
const columnDefault = `CASE WHEN a.attgenerated = '' THEN coalesce(pg_get_expr(d.adbin, d.adrelid), '') ELSE '' END`

// columnDeclarations returns, for Event.Relation, the NOT NULL flag and the
// DEFAULT expression of the columns of the table with OID rel.
func columnDeclarations(ctx context.Context, q querier, rel uint32) ([]CatalogColumn, error) {
	rows, err := q.Query(ctx, `SELECT a.attname::text, a.attnotnull, `+columnDefault+` FROM pg_attribute a
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, rel)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: looking up the NOT NULL flags and DEFAULTs of the columns of table %d: %w", rel, err)
	}
	cols, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (c CatalogColumn, err error) {
		err = row.Scan(&c.Name, &c.NotNull, &c.Default)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgcdc: looking up the NOT NULL flags and DEFAULTs of the columns of table %d: %w", rel, err)
	}
	return cols, nil
}

// streamDeclared is columnDeclarations for a Relation message.
func (k *catalog) streamDeclared(ctx context.Context, oid uint32) ([]CatalogColumn, error) {
	conn, err := k.connection(ctx)
	if err != nil {
		return nil, err
	}
	cols, err := columnDeclarations(ctx, conn, oid)
	if err != nil {
		k.close()
	}
	return cols, err
}

// connection returns the stream's connection, connecting when needed.
// Questions are rare (at Relation messages), and the connection may have
// idled out or outlived a server restart since the last one, so it is
// pinged first and replaced when dead, rather than failing the stream.
func (k *catalog) connection(ctx context.Context) (*pgx.Conn, error) {
	if k.conn != nil && k.conn.Ping(ctx) != nil {
		k.close()
	}
	if k.conn == nil {
		conn, err := k.cfg.connect(ctx, "connecting to read the catalog")
		if err != nil {
			return nil, err
		}
		k.conn = conn
	}
	return k.conn, nil
}

// streamKey is key for a Relation message, which names the table by OID.
func (k *catalog) streamKey(ctx context.Context, oid uint32, schema, name string, columns []string) ([]string, error) {
	conn, err := k.connection(ctx)
	if err != nil {
		return nil, err
	}
	key, err := k.key(ctx, conn, oid, schema, name, columns)
	if err != nil {
		k.close()
	}
	return key, err
}

// streamIdentityOrder returns the columns of the replica identity index
// of the table with OID oid in the index's order: its primary key's
// (REPLICA IDENTITY DEFAULT), else, with usingIndex, the index's (USING
// INDEX). A Relation message flags these columns but lists them in the
// table's order; the key follows the index, as PRIMARY KEY (b, a) says
// and Debezium's key is written.
func (k *catalog) streamIdentityOrder(ctx context.Context, oid uint32, usingIndex bool) ([]string, error) {
	conn, err := k.connection(ctx)
	if err != nil {
		return nil, err
	}
	names, err := indexColumns(ctx, conn, oid, !usingIndex)
	if err != nil {
		k.close()
		return nil, fmt.Errorf("pgcdc: looking up the replica identity index of table %d: %w", oid, err)
	}
	return names, nil
}

// streamType is describeType for the types of a Relation message.
func (k *catalog) streamType(ctx context.Context, oid uint32) (CatalogType, bool, error) {
	conn, err := k.connection(ctx)
	if err != nil {
		return CatalogType{}, false, err
	}
	t, found, err := describeType(ctx, conn, oid)
	if err != nil {
		k.close()
	}
	return t, found, err
}

// describeType reads what the type with OID oid is made of; found is
// false when there is no such type (dropped since the change was made).
func describeType(ctx context.Context, q querier, oid uint32) (t CatalogType, found bool, err error) {
	rows, err := q.Query(ctx, `SELECT t.typname::text, t.typtypmod, t.typtype::text, t.typbasetype, t.typelem <> 0 AND t.typlen = -1, t.typelem, coalesce(e.typdelim, ',')::text,
			(SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a WHERE t.typtype = 'c' AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
			(SELECT array_agg(a.atttypid ORDER BY a.attnum) FROM pg_attribute a WHERE t.typtype = 'c' AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
			(SELECT array_agg(l.enumlabel::text ORDER BY l.enumsortorder) FROM pg_enum l WHERE t.typtype = 'e' AND l.enumtypid = t.oid)
		FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem
		WHERE t.oid = $1::oid`, oid)
	if err != nil {
		return t, false, fmt.Errorf("pgcdc: looking up type %d in pg_type: %w", oid, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return t, false, rows.Err()
	}
	var (
		kind, delim string
		names       []string
		types       []uint32
	)
	if err := rows.Scan(&t.Name, &t.Typmod, &kind, &t.Base, &t.Array, &t.Elem, &delim, &names, &types, &t.Labels); err != nil {
		return t, false, fmt.Errorf("pgcdc: looking up type %d in pg_type: %w", oid, err)
	}
	if len(delim) == 1 {
		t.Delim = delim[0]
	} else {
		t.Array = false // a delimiter pgcdc cannot split on: keep the text
	}
	if len(kind) == 1 {
		t.Kind = kind[0]
	}
	if kind != "d" {
		t.Base = 0
	}
	for i := range names {
		t.Attributes = append(t.Attributes, CatalogAttribute{Name: names[i], OID: types[i]})
	}
	return t, true, rows.Err()
}

// sessionCatalog is the Catalog of a replication session's Decoder: Run's
// catalog, asked under the session's context, so that a lookup ends with
// the session.
type sessionCatalog struct {
	ctx context.Context
	k   *catalog
}

// Key is catalog.streamKey.
func (c sessionCatalog) Key(relation uint32, schema, table string, columns []string) ([]string, error) {
	return c.k.streamKey(c.ctx, relation, schema, table, columns)
}

// IdentityIndex is catalog.streamIdentityOrder.
func (c sessionCatalog) IdentityIndex(relation uint32, usingIndex bool) ([]string, error) {
	return c.k.streamIdentityOrder(c.ctx, relation, usingIndex)
}

// Columns is catalog.streamDeclared.
func (c sessionCatalog) Columns(relation uint32) ([]CatalogColumn, error) {
	return c.k.streamDeclared(c.ctx, relation)
}

// Type is catalog.streamType.
func (c sessionCatalog) Type(oid uint32) (CatalogType, bool, error) {
	return c.k.streamType(c.ctx, oid)
}

// close closes the stream's lookup connection, if open.
func (k *catalog) close() {
	if k.conn != nil {
		closeConn(k.conn)
		k.conn = nil
	}
}

// warnPartialRows logs, once per Run, the published tables whose updates
// can leave column values out of Kafka (when the publication publishes
// updates): those with a TOASTable column
// (any type that can be stored out of line: text, bytea, jsonb, arrays...)
// and a replica identity other than FULL. An update that does not touch
// such a column sends it as "unchanged", without its value. Under the
// same key a consumer still has the value from an earlier record, unless
// compaction removed that record; under a new key (an update of the key)
// no record ever had it. REPLICA IDENTITY FULL sends the whole old row,
// from which the decoder fills the value in.
func warnPartialRows(ctx context.Context, q querier, publication string, log *slog.Logger) error {
	rows, err := q.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_publication_tables pt
		JOIN pg_publication p ON p.pubname = pt.pubname
		JOIN pg_namespace n ON n.nspname = pt.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		WHERE pt.pubname = $1 AND p.pubupdate AND c.relreplident <> 'f' AND EXISTS (
			SELECT FROM pg_attribute a
			WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' AND a.attstorage <> 'p')
		ORDER BY 1`, publication)
	if err != nil {
		return fmt.Errorf("pgcdc: listing the tables of publication %q with TOASTable columns: %w", publication, err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgcdc: listing the tables of publication %q with TOASTable columns: %w", publication, err)
	}
	if len(tables) == 0 {
		return nil
	}
	const shown = 20
	more := 0
	if len(tables) > shown {
		more = len(tables) - shown
		tables = tables[:shown]
	}
	log.Warn("published tables without REPLICA IDENTITY FULL have TOASTable columns, whose values updates that do not change them leave out",
		"tables", tables, "more_tables", more,
		"effect", "events list such columns as unchanged and the upsert encoder marks the document partial; after a key change no record "+
			"under the new key holds the values, and compaction can remove the records under the old key that did",
		"fix", "for consumers that keep the latest row per key (upsert encoder, compacted topics): ALTER TABLE ... REPLICA IDENTITY FULL, "+
			"so the whole old row supplies the values")
	return nil
}
