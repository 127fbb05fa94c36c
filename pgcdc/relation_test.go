package pgcdc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestEventRelation runs a table of many declared types (modifiers,
// arrays, a domain with its own modifier, an enum, money and timetz,
// which pgx does not know) through a real PostgreSQL: a snapshot row, a
// streamed insert, an ALTER TYPE adding an enum label and an ALTER TABLE,
// and another insert. Every event carries a Relation that matches
// pg_attribute, pg_type and pg_enum (an enum's labels) at its table
// version, all events of one version share one *Relation, and the ALTER
// gives a new one. NotNull is attnotnull: the primary key and a NOT NULL
// column. Default is pg_get_expr of the column's pg_attrdef row (a
// constant, a function, a sequence), read again after ALTER COLUMN SET
// DEFAULT. The records are read back from the topic to check each was
// written.
func TestEventRelation(t *testing.T) {
	e := newPGEnv(t)
	table := e.name + "_rel"
	domain := e.name + "_price"
	enum := e.name + "_mood"
	t.Cleanup(func() {
		e.exec("DROP TABLE IF EXISTS " + table + "; DROP DOMAIN IF EXISTS " + domain + "; DROP TYPE IF EXISTS " + enum)
	})
	e.exec("CREATE DOMAIN " + domain + " AS numeric(10,2)")
	e.exec("CREATE TYPE " + enum + " AS ENUM ('sad', 'happy')")
	e.exec(`CREATE TABLE ` + table + ` (id int PRIMARY KEY, n numeric(12,3), nn numeric, t3 time(3), tz timetz, ts timestamp(6),
		m money, b8 bit(8), vb varbit, p point, na numeric(5,1)[], da date[], price ` + domain + `, mood ` + enum + `, v varchar(20) NOT NULL DEFAULT 'x''y',
		s serial, at timestamptz DEFAULT now())`)
	e.exec("INSERT INTO " + table + " VALUES (1, 1, 1, '01:02:03', '01:02:03+01', now(), 1, B'10101010', B'1', '(1,2)', '{1.5}', '{2024-01-01}', 3.5, 'sad', 'x')")

	var (
		mu     sync.Mutex
		events []kafkasink.Event
	)
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), after: func(_ int, b *kafkasink.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, b.Events...)
		return nil
	}}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "the snapshot row", r, func() bool { return count() >= 1 })
	waitFor(t, 30*time.Second, "the stream", r, func() bool { return e.confirmedFlush() != 0 })
	e.exec("INSERT INTO " + table + " VALUES (2, 2, 2, '01:02:03', '01:02:03+01', now(), 2, B'00000001', B'11', '(1,2)', '{1.5}', '{2024-01-01}', 3.5, 'happy', 'y')")
	e.exec("INSERT INTO " + table + " VALUES (3, 3, 3, '01:02:03', '01:02:03+01', now(), 3, B'00000001', B'11', '(1,2)', '{1.5}', '{2024-01-01}', 3.5, 'happy', 'z')")
	want1 := declaredColumns(t, e, table)
	// The catalog is read when a Relation message is decoded, not at the
	// change: let the stream describe the table before the ALTERs.
	waitFor(t, 30*time.Second, "the streamed inserts", r, func() bool { return count() >= 3 })
	e.exec("ALTER TYPE " + enum + " ADD VALUE 'ok' BEFORE 'happy'")
	e.exec("ALTER TABLE " + table + " ALTER COLUMN n TYPE numeric(20,4), ADD COLUMN ts0 timestamptz(0), ALTER COLUMN nn SET DEFAULT 1.50")
	e.exec("INSERT INTO " + table + " (id, v, ts0) VALUES (4, 'w', now())")
	want2 := declaredColumns(t, e, table)
	waitFor(t, 30*time.Second, "the four events", r, func() bool { return count() >= 4 })
	if recs := sinktest.ReadCommitted(t, e.brokers, "t.public."+table); len(recs) != 4 {
		t.Fatalf("the topic holds %d records, want 4", len(recs))
	}

	mu.Lock()
	defer mu.Unlock()
	for i, ev := range events {
		want := want1
		if i == 3 {
			want = want2
		}
		if got := describeRelation(ev.Relation); got != want {
			t.Errorf("event %d (%s id=%v): Relation\n%s\nwant (from the catalog)\n%s", i, ev.Op, ev.After[0].Value, got, want)
		}
	}
	if events[1].Relation != events[2].Relation {
		t.Error("two streamed events of one table version carry different *Relation values; want one shared")
	}
	if events[3].Relation == events[2].Relation {
		t.Error("the event after ALTER TABLE carries the Relation from before it")
	}
}

// describeRelation writes a Relation one column a line: name, type name,
// modifier, the element or base type, and an enum's labels.
func describeRelation(r *kafkasink.Relation) string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, c := range r.Columns {
		fmt.Fprintf(&b, "%s %s %c %d", c.Name, c.Type.Name, c.Type.Kind, c.Type.Modifier)
		if c.Type.Elem != nil {
			fmt.Fprintf(&b, " elem=%s/%d", c.Type.Elem.Name, c.Type.Elem.Modifier)
		}
		if c.Type.Base != nil {
			fmt.Fprintf(&b, " base=%s/%d", c.Type.Base.Name, c.Type.Base.Modifier)
		}
		if c.Type.Labels != nil {
			fmt.Fprintf(&b, " labels=%s", strings.Join(c.Type.Labels, ","))
		}
		if c.NotNull {
			b.WriteString(" not null")
		}
		if c.Default != "" {
			fmt.Fprintf(&b, " default=%s", c.Default)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// declaredColumns describes table's columns from pg_attribute and pg_type
// in describeRelation's form.
func declaredColumns(t *testing.T, e *pgEnv, table string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := e.db.Query(ctx, `SELECT a.attname::text || ' ' || t.typname || ' ' || t.typtype::text || ' ' || a.atttypmod
			|| coalesce(' elem=' || el.typname || '/' || a.atttypmod, '')
			|| coalesce(' base=' || bt.typname || '/' || t.typtypmod, '')
			|| coalesce(' labels=' || (SELECT string_agg(l.enumlabel::text, ',' ORDER BY l.enumsortorder) FROM pg_enum l WHERE l.enumtypid = t.oid), '')
			|| CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
			|| CASE WHEN a.attgenerated = '' THEN coalesce(' default=' || pg_get_expr(d.adbin, d.adrelid), '') ELSE '' END
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		LEFT JOIN pg_type el ON el.oid = t.typelem AND t.typlen = -1 AND t.typelem <> 0
		LEFT JOIN pg_type bt ON bt.oid = t.typbasetype AND t.typtype = 'd'
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
