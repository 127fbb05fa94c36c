//go:build unix

package pgcdc

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// BenchmarkSnapshotReadChunk measures the one-worker snapshot's reading
// on the client, what a CPU profile of bench -snapshot puts at a quarter
// of the snapshot's CPU: readChunk reading a table of 200 000 rows of
// about 200 bytes (bench's columns) in chunks of 10 000 by the snapshot's
// own queries, converting every value to the events Write takes. It
// reports ns per row, and this process's CPU per row, which leaves the
// server out (allocs/op are per 200 000 rows); compare runs with
// benchstat.
func BenchmarkSnapshotReadChunk(b *testing.B) {
	const rows, chunk = 200000, 10000
	table := "pgcdc_bench_readchunk"
	db := benchTable(b, table, rows, "left(repeat(md5(i::text), 5), 136)")
	ctx := context.Background()
	r := &runner{cfg: &Config{}}
	ti, problem, err := r.describe(ctx, db, publishedTable{schema: "public", table: table, columns: []string{"id", "version", "status", "amount", "updated_at", "note"}})
	if err != nil || problem != "" {
		b.Fatal(problem, err)
	}
	values := pgoutput.NewValues(func(oid uint32) (CatalogType, bool, error) { return describeType(ctx, db, oid) })
	relation, err := values.Relation(ti.describeColumns())
	if err != nil {
		b.Fatal(err)
	}
	tmpl := rowTemplate{ti: ti, event: kafkasink.Event{Op: kafkasink.OpRead, Schema: ti.schema, Table: ti.table, Key: ti.key, Relation: relation}}
	first, after := ti.chunkQueries(chunk + 1)
	conn := db.PgConn()
	read := 0
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		var key []string
		for {
			sql, args := first, [][]byte(nil)
			if key != nil {
				sql, args = after, [][]byte{[]byte(key[0])}
			}
			events, last, more, err := readChunk(ctx, conn, values, tmpl, sql, args, chunk)
			if err != nil {
				b.Fatal(err)
			}
			read += len(events)
			if !more {
				break
			}
			key = last
		}
	}
	if read != rows*b.N {
		b.Fatalf("read %d rows, want %d", read, rows*b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(read), "ns/row")
	// The wall time holds the server's reading too; this process's CPU
	// time is the client's alone.
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(read), "cpu-ns/row")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
