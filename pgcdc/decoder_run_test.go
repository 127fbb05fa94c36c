package pgcdc

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// userCatalog is a Catalog as a user of the Decoder writes it, with
// queries of its own on an ordinary connection: nothing of Run's.
type userCatalog struct {
	ctx  context.Context
	conn *pgx.Conn
}

func (c userCatalog) index(rel uint32, primary bool) ([]string, error) {
	rows, err := c.conn.Query(c.ctx, `SELECT a.attname::text FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1::oid AND CASE WHEN $2 THEN i.indisprimary ELSE i.indisreplident END
		ORDER BY k.ord`, rel, primary)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if len(names) == 0 {
		return nil, err
	}
	return names, err
}

func (c userCatalog) Key(rel uint32, _, _ string, columns []string) ([]string, error) {
	pk, err := c.index(rel, true)
	for _, col := range pk {
		if !slices.Contains(columns, col) {
			return nil, err
		}
	}
	return pk, err
}

func (c userCatalog) IdentityIndex(rel uint32, usingIndex bool) ([]string, error) {
	return c.index(rel, !usingIndex)
}

func (c userCatalog) Columns(rel uint32) ([]CatalogColumn, error) {
	rows, err := c.conn.Query(c.ctx, `SELECT a.attname::text, a.attnotnull, coalesce(pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped`, rel)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (col CatalogColumn, err error) {
		err = row.Scan(&col.Name, &col.NotNull, &col.Default)
		return col, err
	})
}

// Type knows domains, the only custom types of the test.
func (c userCatalog) Type(oid uint32) (CatalogType, bool, error) {
	var (
		t    CatalogType
		kind string
	)
	err := c.conn.QueryRow(c.ctx, "SELECT typname::text, typtype::text, typbasetype, typtypmod FROM pg_type WHERE oid = $1::oid", oid).
		Scan(&t.Name, &kind, &t.Base, &t.Typmod)
	if err == pgx.ErrNoRows {
		return t, false, nil
	}
	t.Kind, t.Delim = kind[0], ','
	return t, err == nil, err
}

// TestUserDecoderIsRuns: the Decoder Run builds for a replication session
// and one a user builds with NewDecoder, given the DecoderConfig settings
// Run gives (KeylessTables, PrevCommitEnd) and a Catalog of their own
// answering from the same database, yield the same events from the same
// pgoutput messages: the same keys (the primary key of a REPLICA IDENTITY
// FULL table, a key in its index's order, none for a keyless table), the
// same Event.Relation (NOT NULL, DEFAULT, a domain's type) and the same
// PrevCommitEnd. Run configures its Decoder through the public
// DecoderConfig alone.
func TestUserDecoderIsRuns(t *testing.T) {
	e := newPGEnv(t)
	dom := e.name + "_pos"
	full, ordered, keyless := e.name+"_full", e.name+"_ordered", e.name+"_keyless"
	e.exec("CREATE DOMAIN " + dom + " AS int CHECK (VALUE > 0)")
	t.Cleanup(func() { e.exec("DROP DOMAIN IF EXISTS " + dom + " CASCADE") })
	e.exec("CREATE TABLE " + full + " (a int, b text NOT NULL DEFAULT 'x', c int, PRIMARY KEY (c, a))")
	e.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	e.exec("CREATE TABLE " + ordered + " (a int, b int, n " + dom + ", PRIMARY KEY (b, a))")
	e.exec("CREATE TABLE " + keyless + " (v text)")
	oid := func(table string) uint32 {
		var o uint32
		e.queryRow(&o, fmt.Sprintf("SELECT '%s'::regclass::oid", table))
		return o
	}
	fullOID, orderedOID, keylessOID := oid(full), oid(ordered), oid(keyless)
	var domOID uint32
	e.queryRow(&domOID, fmt.Sprintf("SELECT '%s'::regtype::oid", dom))

	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := []wal{
		{0x1000, pgoutputmsg.Begin(0x1900, t1, 7)},
		{0x1000, pgoutputmsg.Relation(0, fullOID, "public", full, 'f',
			pgoutputmsg.Key("a", pgtype.Int4OID), pgoutputmsg.Key("b", pgtype.TextOID), pgoutputmsg.Key("c", pgtype.Int4OID))},
		{0x1010, pgoutputmsg.Insert(0, fullOID, pgoutputmsg.Text("1"), pgoutputmsg.Text("x"), pgoutputmsg.Text("2"))},
		{0x1020, pgoutputmsg.Update(0, fullOID, 'O', pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("x"), pgoutputmsg.Text("2")),
			pgoutputmsg.Tuple(pgoutputmsg.Text("1"), pgoutputmsg.Text("y"), pgoutputmsg.Text("3")))},
		{0x1030, pgoutputmsg.Relation(0, orderedOID, "public", ordered, 'd',
			pgoutputmsg.Key("a", pgtype.Int4OID), pgoutputmsg.Key("b", pgtype.Int4OID), pgoutputmsg.Col("n", domOID))},
		{0x1040, pgoutputmsg.Insert(0, orderedOID, pgoutputmsg.Text("1"), pgoutputmsg.Text("2"), pgoutputmsg.Text("5"))},
		{0x1050, pgoutputmsg.Relation(0, keylessOID, "public", keyless, 'd', pgoutputmsg.Col("v", pgtype.TextOID))},
		{0x1060, pgoutputmsg.Insert(0, keylessOID, pgoutputmsg.Text("v"))},
		{0x1900, pgoutputmsg.Commit(0x1900, 0x1950, t1)},
		{0x2000, pgoutputmsg.Begin(0x2900, t1, 8)},
		{0x2010, pgoutputmsg.Insert(0, orderedOID, pgoutputmsg.Text("3"), pgoutputmsg.Text("4"), pgoutputmsg.Null())},
		{0x2900, pgoutputmsg.Commit(0x2900, 0x2950, t1)},
	}
	const prev = kafkasink.LSN(0x500)

	// Run's.
	cfg := e.config(full, ordered, keyless)
	cfg.KeylessTables = true
	cfg = cfg.withDefaults()
	r := &runner{cfg: &cfg, log: cfg.Logger, protocol: 2, spool: &spoolDir{path: t.TempDir()},
		ck: checkpointer{cur: cursor{cursorFields: cursorFields{LastCommitEnd: lsnText(prev)}}}}
	r.catalog = &catalog{cfg: r.cfg, log: r.log}
	t.Cleanup(r.catalog.close)
	s := newTestSession(t, 1000)
	s.dec.Close()
	dec, err := r.newDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dec.Close() })
	s.dec = dec
	feed(t, dec, msgs...)
	runs := s.cur.events

	// The user's.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	user, rec := newTestDecoder(t, DecoderConfig{
		ProtocolVersion: 2,
		KeylessTables:   true,
		PrevCommitEnd:   prev,
		Catalog:         userCatalog{ctx: ctx, conn: conn},
	})
	feed(t, user, msgs...)

	if len(runs) != 6 || len(rec.events) != len(runs) {
		t.Fatalf("Run's decoder delivered %d events, the user's %d; want 6 each", len(runs), len(rec.events))
	}
	for i := range runs {
		if !reflect.DeepEqual(runs[i], rec.events[i]) {
			t.Errorf("event %d:\nRun's:  %+v\nuser's: %+v", i, runs[i], rec.events[i])
		}
	}
	// What the two agree on is what Run is documented to do.
	for _, c := range []struct {
		i       int
		key     []string
		keyless bool
		prev    kafkasink.LSN
	}{
		{0, []string{"c", "a"}, false, prev},
		{1, []string{"c", "a"}, false, prev}, // the key change's delete
		{3, []string{"b", "a"}, false, prev},
		{4, nil, true, prev},
		{5, []string{"b", "a"}, false, 0x1950},
	} {
		got := runs[c.i]
		if !slices.Equal(got.Key, c.key) || got.Keyless != c.keyless || got.Source.PrevCommitEnd != c.prev {
			t.Errorf("event %d: Key %q, Keyless %v, PrevCommitEnd %s; want %q, %v, %s",
				c.i, got.Key, got.Keyless, got.Source.PrevCommitEnd, c.key, c.keyless, c.prev)
		}
	}
	b := runs[0].Relation.Columns[1]
	if !b.NotNull || b.Default != "'x'::text" {
		t.Errorf("column b: NotNull %v, Default %q; want true, 'x'::text", b.NotNull, b.Default)
	}
	if n := runs[3].Relation.Columns[2].Type; n == nil || n.Name != dom {
		t.Errorf("column n has type %+v; want the domain %s", n, dom)
	}
}
