package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// This file notices tables joining and leaving the publication while Run
// streams, and backfills those that join (Config.BackfillAddedTables).
//
// pgoutput streams a table's changes from the moment it joins and stops
// when it leaves, but says nothing of either: it sends a Relation message
// before the first change of a table, and nothing when a table leaves. So
// Run reads the publication's tables again, on the monitor's connection,
// every StandbyInterval (a table may join with no change yet, and only
// the catalog shows one that left), and at once when a Relation message
// names a table it did not know (the usual way a table that joined shows
// itself, in the stream's order). The pump compares each reading with the
// tables it knows, between two source transactions, as it takes backfill
// calls.

// publicationChangesMax bounds RunStats.PublicationChanges.
const publicationChangesMax = 32

// PublicationChange is a table that joined or left the publication while
// Run ran, as Monitor reports it (RunStats.PublicationChanges).
type PublicationChange struct {
	// Table is the table, as kafkasink.TableName writes it.
	Table string
	// Added says it joined; false, it left: its changes after that are
	// not streamed.
	Added bool
	At    time.Time
	// Backfill is the id of the backfill reading the rows of a table
	// that joined (Config.BackfillAddedTables), "" when there is none:
	// the option is off, or the backfill was refused
	// (RunStats.LastBackfillError says why).
	Backfill string
}

// publicationWatch carries the publication's tables from the monitor's
// goroutine, which reads them, to the pump, which acts on them. It is
// safe for concurrent use.
type publicationWatch struct {
	ask chan struct{} // capacity 1: the pump asks for a reading now

	mu     sync.Mutex
	tables []publishedName // the last reading not yet taken, nil when none; guarded by mu
	wake   chan struct{}   // the streaming session's pump, nil when none; guarded by mu
}

func newPublicationWatch() *publicationWatch {
	return &publicationWatch{ask: make(chan struct{}, 1)}
}

// attach makes wake the channel a reading pokes; nil detaches, and the
// monitor then reads nothing.
func (w *publicationWatch) attach(wake chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wake, w.tables = wake, nil
}

// streaming reports whether a session waits for readings.
func (w *publicationWatch) streaming() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake != nil
}

// put hands a reading to the pump, replacing one it has not taken.
func (w *publicationWatch) put(tables []publishedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake != nil {
		w.tables = tables
		poke(w.wake)
	}
}

// take returns the reading not yet taken, nil when none.
func (w *publicationWatch) take() []publishedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tables
	w.tables = nil
	return t
}

// publishedName is a table of a publication as pg_publication_tables
// lists it, with the partitioned table it is a partition of (itself when
// it is none).
type publishedName struct{ schema, table, rootSchema, root string }

// listPublication lists the tables of publication pub, ordered by schema
// and table.
func listPublication(ctx context.Context, q querier, pub string) ([]publishedName, error) {
	var version int
	if err := q.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, fmt.Errorf("pgcdc: reading server_version_num: %w", err)
	}
	root := "c.oid"
	if version >= 120000 { // pg_partition_root came with PostgreSQL 12
		root = "coalesce(pg_partition_root(c.oid), c.oid)"
	}
	rows, err := q.Query(ctx, `SELECT pt.schemaname::text, pt.tablename::text, rn.nspname::text, r.relname::text
		FROM pg_publication_tables pt
		JOIN pg_namespace n ON n.nspname = pt.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		JOIN pg_class r ON r.oid = `+root+`
		JOIN pg_namespace rn ON rn.oid = r.relnamespace
		WHERE pt.pubname = $1
		ORDER BY 1, 2`, pub)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: listing the tables of publication %q: %w", pub, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (publishedName, error) {
		var p publishedName
		err := row.Scan(&p.schema, &p.table, &p.rootSchema, &p.root)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgcdc: listing the tables of publication %q: %w", pub, err)
	}
	return out, nil
}

// tableNames returns the names of list's tables, as kafkasink.TableName
// writes them, sorted; never nil, so that a cursor records an empty
// publication as empty.
func tableNames(list []publishedName) []string {
	names := make([]string, len(list))
	for i, p := range list {
		names[i] = kafkasink.TableName(p.schema, p.table)
	}
	slices.Sort(names)
	return names
}

// knowTables makes names, a reading of the publication by the server
// check (atCheck) or by the initial snapshot, the tables the pump
// compares later readings with. With Config.BackfillAddedTables the
// cursor records them, so that a later start compares with them; at the
// server check, only when the cursor records none yet.
func (b *backfiller) knowTables(names []string, atCheck bool) {
	cur := &b.r.ck.cur
	switch {
	case !b.r.cfg.BackfillAddedTables:
		cur.Tables = nil // a list recorded while the option was on is stale
		b.known = names
	case atCheck && cur.Tables != nil:
		// The first session compares the recorded list with the
		// publication: a table that joined while Run was stopped is
		// backfilled too.
	default:
		cur.Tables = names
	}
}

// relation notes a Relation message of the stream: one of a table the
// pump does not know asks the monitor to read the publication now. A
// nil backfiller, a runner's outside Run (as tests build one), does
// nothing.
func (b *backfiller) relation(schema, table string) {
	if b == nil {
		return
	}
	name := kafkasink.TableName(schema, table)
	if _, known := slices.BinarySearch(b.known, name); known || b.asked[name] {
		return
	}
	b.asked[name] = true
	poke(b.r.watch.ask)
}

// tablesRead compares a reading of the publication with the tables the
// pump knows: a table that left is logged, and its backfill cancelled; a
// table that joined is logged and, with Config.BackfillAddedTables,
// backfilled.
func (b *backfiller) tablesRead(ctx context.Context, list []publishedName) {
	names := tableNames(list)
	if slices.Equal(names, b.known) {
		return
	}
	cfg := b.r.cfg
	for _, name := range b.known {
		if _, ok := slices.BinarySearch(names, name); ok {
			continue
		}
		b.r.log.Warn("a table left the publication: its changes from then on are not streamed", "table", name, "publication", cfg.Publication)
		cfg.Monitor.publicationChange(PublicationChange{Table: name, At: time.Now()})
		if schema, table, err := splitTable(name); err == nil {
			if i := slices.IndexFunc(b.live, func(c backfillCursor) bool { return c.Table == schema+"."+table }); i >= 0 {
				b.change(cmdCancel, i)
			}
		}
	}
	for _, p := range list {
		name := kafkasink.TableName(p.schema, p.table)
		if _, ok := slices.BinarySearch(b.known, name); ok {
			continue
		}
		ch := PublicationChange{Table: name, Added: true, At: time.Now()}
		if cfg.BackfillAddedTables {
			c, err := b.accept(ctx, BackfillRequest{Table: name}, "added")
			var be *BackfillError
			switch {
			case err != nil && !errors.As(err, &be) && retryable(err):
				// The connection failed, not the table: the table
				// stays unknown, so the next reading tries again.
				b.r.log.Warn("a table joined the publication, and asking for its backfill failed; trying again at the next reading of the publication",
					"table", name, "error", err)
				names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
				continue
			case err != nil:
				b.refused(err, "added")
			}
			ch.Backfill = c.ID
		}
		b.r.log.Info("a table joined the publication: its changes are streamed", "table", name, "publication", cfg.Publication,
			"backfill", ch.Backfill)
		if len(cfg.Tables) > 0 && !cfg.AcceptPublicationTables && !namedIn(cfg.Tables, p) {
			b.r.log.Warn("a table joined the publication but Config.Tables (-tables) does not name it: it is streamed, as the publication decides; "+
				"the next start refuses the difference: add it to Tables, or set Config.AcceptPublicationTables (-accept-publication-tables)",
				"table", name, "publication", cfg.Publication)
		}
		cfg.Monitor.publicationChange(ch)
	}
	b.known = names
	clear(b.asked)
	// With Config.BackfillAddedTables the next Write records names
	// (carryBackfills), in the Write that records the backfills it
	// accepted.
	b.changed = b.changed || cfg.BackfillAddedTables
}

// namedIn reports whether tables, Config.Tables, names p: the table
// itself or, for a partition, the partitioned table it belongs to, as
// checkPublicationTables compares them.
func namedIn(tables []string, p publishedName) bool {
	return slices.ContainsFunc(tables, func(t string) bool {
		s, n, err := splitTable(t)
		return err == nil && (s == p.schema && n == p.table || s == p.rootSchema && n == p.root)
	})
}

// snapshotNames returns the names of the tables a snapshot reads, as
// tableNames does.
func snapshotNames(published []publishedTable) []string {
	list := make([]publishedName, len(published))
	for i, p := range published {
		list[i] = publishedName{schema: p.schema, table: p.table}
	}
	return tableNames(list)
}
