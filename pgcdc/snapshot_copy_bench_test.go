package pgcdc

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// BenchmarkSnapshotChunkRead measures what item 2 of issue 31 asks:
// reading a table's chunks with today's keyset SELECT against
// COPY (SELECT ...) TO STDOUT of the same chunks, both on one connection,
// both handing every field's text on (the value conversion after is the
// same for both, and left out), and a whole-table COPY as the ceiling.
// Compare the sub-benchmarks' ns/op in the same run.
func BenchmarkSnapshotChunkRead(b *testing.B) {
	const rows, chunk = 200000, 10000
	table := "pgcdc_bench_copy"
	db := benchTable(b, table, rows, "repeat(md5(i::text), 4)")
	ctx := context.Background()
	cols := "id, version, status, amount, updated_at, note, id"
	query := func(after int64) string {
		return fmt.Sprintf("SELECT %s FROM ONLY %s WHERE (id) > (%d) ORDER BY id LIMIT %d", cols, table, after, chunk+1)
	}
	conn := db.PgConn()
	var sink int
	b.Run("select", func(b *testing.B) {
		for b.Loop() {
			for after := int64(0); after < rows; after += chunk {
				rr := conn.ExecParams(ctx, query(after), nil, nil, nil, nil)
				for rr.NextRow() {
					for _, v := range rr.Values() {
						sink += len(v)
					}
				}
				if _, err := rr.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("copy-text", func(b *testing.B) {
		for b.Loop() {
			for after := int64(0); after < rows; after += chunk {
				w := &copyFields{f: func(v []byte) { sink += len(v) }}
				if _, err := conn.CopyTo(ctx, w, "COPY ("+query(after)+") TO STDOUT"); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("copy-table-ceiling", func(b *testing.B) {
		for b.Loop() {
			w := &copyFields{f: func(v []byte) { sink += len(v) }}
			if _, err := conn.CopyTo(ctx, w, "COPY (SELECT "+cols+" FROM "+table+") TO STDOUT"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	_ = sink
}

// copyFields splits COPY's text format into fields, undoing its
// backslash escapes, and hands each to f: the work a COPY reader adds to
// what a SELECT's DataRow already gives.
type copyFields struct {
	f    func([]byte)
	rest []byte
	buf  []byte
}

func (c *copyFields) Write(p []byte) (int, error) {
	data := p
	if len(c.rest) > 0 {
		data = append(c.rest, p...)
	}
	for {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break
		}
		for field := range bytes.SplitSeq(data[:nl], []byte{'\t'}) {
			if bytes.IndexByte(field, '\\') < 0 {
				c.f(field)
				continue
			}
			c.buf = c.buf[:0]
			for i := 0; i < len(field); i++ {
				if field[i] == '\\' && i+1 < len(field) {
					i++
				}
				c.buf = append(c.buf, field[i])
			}
			c.f(c.buf)
		}
		data = data[nl+1:]
	}
	c.rest = append(c.rest[:0], data...)
	return len(p), nil
}

// benchTable connects to the test server and fills table with rows rows
// of bench's columns, note being noteSQL (of i), for the snapshot reading
// benchmarks; the table is dropped and the connection closed at the end.
func benchTable(b *testing.B, table string, rows int, noteSQL string) *pgx.Conn {
	b.Helper()
	pg := sinktest.Env(b, sinktest.EnvPG)[0]
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close(context.Background()) })
	for _, sql := range []string{"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id bigint PRIMARY KEY, version bigint NOT NULL, status text NOT NULL, amount numeric(12,2) NOT NULL, updated_at timestamptz NOT NULL, note text NOT NULL)",
		fmt.Sprintf("INSERT INTO %s SELECT i, 1, 'new', i * 1.25, now(), %s FROM generate_series(1, %d) i", table, noteSQL, rows),
		"VACUUM ANALYZE " + table} {
		if _, err := db.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { db.Exec(context.Background(), "DROP TABLE "+table) })
	return db
}
