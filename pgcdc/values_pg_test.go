package pgcdc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// rowsByEncoder reads the table's topic of every encoder and returns, per
// encoder prefix, the row images of the records in topic order (rowImage).
// It waits until each topic holds n records.
func (e *pgEnv) rowsByEncoder(table string, n int, r *run) map[string][]map[string]any {
	e.t.Helper()
	out := make(map[string][]map[string]any)
	for _, prefix := range encoderPrefixes {
		for _, rec := range e.readEncoded(r, prefix, table, n) {
			row, ok := rowImage(prefix, rec.value)
			if !ok {
				e.t.Fatalf("%s record %v: no row image", prefix, rec.value)
			}
			out[prefix] = append(out[prefix], row)
		}
	}
	return out
}

// TestJSONNullIsNotSQLNull checks that a jsonb 'null' and an SQL NULL,
// as a column and as array elements, arrive distinct in every encoder,
// from the snapshot and from the stream.
func TestJSONNullIsNotSQLNull(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.name + "_jnull"
	e.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, jb jsonb, j json, arr jsonb[])")
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table)
	insert := func(id int) {
		e.exec("INSERT INTO "+table+` VALUES ($1, 'null', NULL, ARRAY['null'::jsonb, NULL, '"null"', '{"a": null}']),`+
			` ($1 + 1, NULL, 'null', ARRAY[NULL, 'null'::jsonb])`, id)
	}
	insert(1) // snapshot
	cfg := e.config()
	cfg.CreatePublication = false
	cfg.Snapshot = true
	_, done := start(t, cfg, e.newEncoderSinks())
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	insert(3) // stream

	// What the database holds: a json value's text, or nil for NULL.
	type dbRow struct {
		jb, j *string
		arr   []*string
	}
	want := make(map[int32]dbRow)
	e.mu.Lock()
	rows, err := e.db.Query(context.Background(), "SELECT id, jb::text, j::text, arr::text[] FROM "+table)
	if err == nil {
		for rows.Next() {
			var id int32
			var r dbRow
			if err = rows.Scan(&id, &r.jb, &r.j, &r.arr); err != nil {
				break
			}
			want[id] = r
		}
		rows.Close()
		err = rows.Err()
	}
	e.mu.Unlock()
	if err != nil || len(want) != 4 {
		t.Fatalf("reading the table: %d rows, %v", len(want), err)
	}
	// A json value arrives as a string holding its text; NULL as null.
	asKafka := func(s *string) any {
		if s == nil {
			return nil
		}
		return *s
	}
	for prefix, got := range e.rowsByEncoder(table, 4, done) {
		for _, row := range got {
			id := int32(row["id"].(float64))
			w := want[id]
			arr := make([]any, len(w.arr))
			for i, s := range w.arr {
				arr[i] = asKafka(s)
			}
			for col, wv := range map[string]any{"jb": asKafka(w.jb), "j": asKafka(w.j), "arr": arr} {
				if gv, ok := row[col]; !ok || !reflect.DeepEqual(gv, wv) {
					t.Errorf("%s: row %d: %s is %#v in Kafka (present %t), want %#v", prefix, id, col, gv, ok, wv)
				}
			}
		}
		ids := make([]int, 0, len(got))
		for _, row := range got {
			ids = append(ids, int(row["id"].(float64)))
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []int{1, 2, 3, 4}) {
			t.Errorf("%s: rows %v, want 1 to 4", prefix, ids)
		}
	}
}

// TestCustomTypesAsJSON streams arrays of enums, composites (alone and in
// arrays, nested), domains over scalars and over arrays, from the snapshot
// and from the stream, and compares each column in Kafka with the
// database's own JSON of it (to_jsonb), which renders arrays as arrays,
// composites as objects and domains as their base type; the snapshot
// with one worker and with two (each worker converts with its own
// description of the types).
func TestCustomTypesAsJSON(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d snapshot workers", workers), func(t *testing.T) {
			t.Parallel()
			testCustomTypesAsJSON(t, workers)
		})
	}
}

func testCustomTypesAsJSON(t *testing.T, workers int) {
	e := newPGEnv(t)
	table := e.name + "_custom"
	mood, pair, pos, list, nest := e.name+"_mood", e.name+"_pair", e.name+"_pos", e.name+"_list", e.name+"_nest"
	dropTypes := func() {
		e.exec("DROP TABLE IF EXISTS " + table)
		e.exec("DROP TYPE IF EXISTS " + nest + "; DROP TYPE IF EXISTS " + pair + "; DROP DOMAIN IF EXISTS " + pos + "; DROP DOMAIN IF EXISTS " + list + "; DROP TYPE IF EXISTS " + mood)
	}
	dropTypes()
	t.Cleanup(dropTypes)
	e.exec("CREATE TYPE " + mood + " AS ENUM ('sad', 'happy', 'o k', 'NULL', 'a\"b')")
	e.exec("CREATE DOMAIN " + pos + " AS integer CHECK (VALUE > 0)")
	e.exec("CREATE DOMAIN " + list + " AS integer[]")
	e.exec("CREATE TYPE " + pair + " AS (n int, label text, moods " + mood + "[], p " + pos + ")")
	e.exec("CREATE TYPE " + nest + " AS (inner_pair " + pair + ", tags text[])")
	e.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, moods " + mood + "[], grid " + mood + "[][], pr " + pair + ", prs " + pair + "[], " +
		"ps " + pos + ", pss " + pos + "[], l " + list + ", nt " + nest + ")")
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table)
	insert := func(id int) {
		e.exec(`INSERT INTO `+table+` VALUES ($1,
			'{happy,"o k",NULL,"NULL","a\"b"}', '{{sad,happy},{NULL,"o k"}}',
			ROW(1, 'a "q" \ b, (x)', '{happy,"o k"}', 5),
			ARRAY[ROW(2, '', NULL, NULL)::`+pair+`, NULL, ROW(NULL, 'z', '{}', 1)::`+pair+`],
			7, '{1,NULL,3}', '{4,5}',
			ROW(ROW(3, '"(,)" \', '{sad}', 2)::`+pair+`, '{"a b",NULL,"\""}')),
			($1 + 1, '{}', NULL, ROW(NULL, NULL, NULL, NULL), '{}', NULL, NULL, '{}', NULL)`, id)
	}
	insert(1) // snapshot
	cfg := e.config()
	cfg.CreatePublication = false
	cfg.Snapshot = true
	cfg.SnapshotWorkers = workers
	sink := e.newSink(e.name)
	_, done := start(t, cfg, sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	insert(3) // stream

	want := make(map[int]map[string]any)
	e.mu.Lock()
	rows, err := e.db.Query(context.Background(), "SELECT id, to_jsonb(t)::text FROM "+table+" t")
	if err == nil {
		for rows.Next() {
			var id int
			var doc string
			if err = rows.Scan(&id, &doc); err != nil {
				break
			}
			var m map[string]any
			if err = json.Unmarshal([]byte(doc), &m); err != nil {
				break
			}
			want[id] = m
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	e.mu.Unlock()
	if err != nil || len(want) != 4 {
		t.Fatalf("reading the table: %d rows, %v", len(want), err)
	}
	var recs []record
	waitFor(t, 30*time.Second, "4 records", done, func() bool {
		recs = e.readTopic(table)
		return len(recs) >= 4
	})
	for _, r := range recs {
		id := int(num(r.After, "id"))
		w, ok := want[id]
		if !ok {
			t.Errorf("%s record of row %d, which the table does not hold", r.Op, id)
			continue
		}
		for col, wv := range w {
			if gv := r.After[col]; !reflect.DeepEqual(gv, wv) {
				t.Errorf("%s of row %d: %s is %#v in Kafka, %#v in the database", r.Op, id, col, gv, wv)
			}
		}
	}
}

// TestCompositeChangedWhileStreaming adds an attribute to a composite type
// while its table streams. pgoutput describes the table again only when
// the table changes, not the type, so the decoder must notice that a value
// no longer fits the type it described and read the catalog again.
func TestCompositeChangedWhileStreaming(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table, pair := e.name+"_comp", e.name+"_cpair"
	drop := func() {
		e.exec("DROP TABLE IF EXISTS " + table)
		e.exec("DROP TYPE IF EXISTS " + pair)
	}
	drop()
	t.Cleanup(drop)
	e.exec("CREATE TYPE " + pair + " AS (a int, b text)")
	e.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, p " + pair + ")")
	sink := e.newSink(e.name)
	_, done := start(t, e.config("public."+table), sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	e.exec("INSERT INTO " + table + " VALUES (1, ROW(1, 'x'))")
	waitFor(t, 30*time.Second, "the first row", done, func() bool { return len(e.readTopic(table)) == 1 })
	e.exec("ALTER TYPE " + pair + " ADD ATTRIBUTE c int")
	e.exec("INSERT INTO " + table + " VALUES (2, ROW(2, 'y', 3))")

	var recs []record
	waitFor(t, 30*time.Second, "the second row", done, func() bool {
		recs = e.readTopic(table)
		return len(recs) == 2
	})
	var doc string
	e.mu.Lock()
	err := e.db.QueryRow(context.Background(), "SELECT to_jsonb(p)::text FROM "+table+" WHERE id = 2").Scan(&doc)
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch id := num(r.After, "id"); id {
		case 1:
			if got := r.After["p"]; !reflect.DeepEqual(got, map[string]any{"a": 1.0, "b": "x"}) {
				t.Errorf("row 1, before ALTER TYPE: p is %#v in Kafka, want {a:1 b:x}", got)
			}
		case 2:
			if got := r.After["p"]; !reflect.DeepEqual(got, want) {
				t.Errorf("row 2, after ALTER TYPE: p is %#v in Kafka, %#v in the database", got, want)
			}
		}
	}
}
