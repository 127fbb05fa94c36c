package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// querier is what reading the catalog needs: a connection or a
// transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// publishedTable is one table as the publication streams it: which of its
// columns and which of its rows. The snapshot reads exactly this, so that
// snapshot rows and streamed changes agree.
type publishedTable struct {
	schema, table string
	// columns are the published columns in table order, as pgoutput's
	// Relation message lists them: the publication's column list, or
	// every column; a generated column only where PostgreSQL 18 publishes
	// it (publish_generated_columns = stored, or named in a column list).
	columns []string
	// rowFilter is the publication's WHERE clause for the table as
	// PostgreSQL prints it (pg_get_expr), "" when every row is published.
	rowFilter string
	// partitioned is set for a partitioned table, published in place of
	// its partitions (publish_via_partition_root): its rows are those of
	// its partitions.
	partitioned bool
}

// name is the table as the snapshot cursor names it, "schema.table".
func (p publishedTable) name() string { return p.schema + "." + p.table }

// publishedTables lists the tables of publication pub, ordered by schema and
// table, as pgoutput streams them to a slot given that one publication.
//
// pg_publication_tables already applies PostgreSQL's own rules, the same
// pgoutput applies: a partition appears on its own unless the publication
// publishes via the partition root, and then only the root appears, with
// the root's column list and row filter; a table the publication reaches
// through FOR ALL TABLES or FOR TABLES IN SCHEMA has no row filter, even
// when the publication also names it with one. Before PostgreSQL 18 its
// attnames may list generated columns when there is no column list, and
// pgoutput does not send them, so they are left out here; from 18 on
// attnames lists exactly what pgoutput sends, stored generated columns
// included where the publication publishes them. Column lists and row
// filters came with PostgreSQL 15; before it every non-generated column
// and every row is published.
func publishedTables(ctx context.Context, q querier, pub string) ([]publishedTable, error) {
	var version int
	if err := q.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, fmt.Errorf("pgcdc: reading server_version_num: %w", err)
	}
	listed, filter := "a.attgenerated = ''", "NULL::text"
	switch {
	case version >= 180000:
		listed, filter = "a.attname = ANY (pt.attnames)", "pt.rowfilter"
	case version >= 150000:
		listed, filter = "a.attgenerated = '' AND a.attname = ANY (pt.attnames)", "pt.rowfilter"
	}
	rows, err := q.Query(ctx, `SELECT pt.schemaname, pt.tablename,
			ARRAY(SELECT a.attname::text FROM pg_attribute a
				WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND `+listed+`
				ORDER BY a.attnum),
			coalesce(`+filter+`, ''), c.relkind = 'p'
		FROM pg_publication_tables pt
		JOIN pg_namespace n ON n.nspname = pt.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		WHERE pt.pubname = $1
		ORDER BY 1, 2`, pub)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: listing the tables of publication %q: %w", pub, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (publishedTable, error) {
		var p publishedTable
		err := row.Scan(&p.schema, &p.table, &p.columns, &p.rowFilter, &p.partitioned)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgcdc: listing the tables of publication %q: %w", pub, err)
	}
	return out, nil
}

// noteColumns remembers the columns a table is streamed with, from the
// snapshot or from a Relation message, and warns when they differ from
// what was known: the publication's column list changed (ALTER
// PUBLICATION ... SET TABLE), or the table did (ALTER TABLE). Records
// already in Kafka keep their columns; only a new snapshot rewrites every
// row in the new shape. A changed row filter is not visible here: the
// Relation message does not carry it.
//
// It runs on the goroutine that runs the snapshot and the decoder, never
// concurrently.
func (r *runner) noteColumns(schema, table string, columns []string, from string) {
	name := schema + "." + table
	if r.columns == nil {
		r.columns = make(map[string][]string)
	}
	old, known := r.columns[name]
	if known && !slices.Equal(old, columns) {
		r.log.Warn("the columns streamed for a table changed: the publication's column list or the table's definition changed; "+
			"records already in Kafka keep the old columns, rows not changed since keep them too; take a new snapshot into a new sink (Config.Slot and the sink id; flags -slot and -sink-id) to rewrite every row",
			"table", name, "old_columns", old, "new_columns", columns, "seen_in", from)
	}
	r.columns[name] = slices.Clone(columns)
}

// checkPublicationTables compares the tables an existing publication
// streams with cfg.Tables, when Tables is set, and refuses a difference
// unless cfg.AcceptPublicationTables accepts it (then it warns). A
// published partition counts as its root: Tables names a partitioned table
// by its root, and the publication lists the partitions unless it
// publishes via the root.
func checkPublicationTables(ctx context.Context, q querier, cfg *Config) error {
	if len(cfg.Tables) == 0 {
		return nil
	}
	list, err := listPublication(ctx, q, cfg.Publication)
	if err != nil {
		return err
	}
	type published struct{ table, root string }
	tables := make([]published, len(list))
	for i, p := range list {
		tables[i] = published{qualified(p.schema, p.table), qualified(p.rootSchema, p.root)}
	}
	wanted := make(map[string]bool, len(cfg.Tables))
	for _, t := range cfg.Tables {
		schema, table, _ := splitTable(t) // validated
		wanted[qualified(schema, table)] = false
	}
	var extra []string
	for _, p := range tables {
		_, isTable := wanted[p.table]
		_, isRoot := wanted[p.root]
		switch {
		case isTable:
			wanted[p.table] = true
		case isRoot:
			wanted[p.root] = true
		default:
			extra = append(extra, p.table)
		}
	}
	var missing []string
	for name, found := range wanted {
		if !found {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	slices.Sort(missing)
	what := fmt.Sprintf("publication %q exists and its tables differ from Config.Tables (-tables): in Tables but not published: [%s]; published but not in Tables: [%s]",
		cfg.Publication, strings.Join(missing, ", "), strings.Join(extra, ", "))
	if cfg.AcceptPublicationTables {
		cfg.Logger.Warn("pgcdc: "+what+"; streaming what the publication has, as Config.AcceptPublicationTables says", "publication", cfg.Publication)
		return nil
	}
	return &kafkasink.ConfigError{Problems: []string{"pgcdc: " + what + ": the publication decides what is streamed. " +
		"Make them agree (ALTER PUBLICATION " + pgx.Identifier{cfg.Publication}.Sanitize() + " SET TABLE ..., or correct Config.Tables), " +
		"or set Config.AcceptPublicationTables (-accept-publication-tables) to stream what the publication has"}}
}
