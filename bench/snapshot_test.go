package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestSnapshotRound runs one -snapshot round on a small table of the
// integration environment: COPY, the ceiling into Kafka, 1 and 2 workers
// in child processes and, unless -short or Java and Maven are missing (it
// says which), Debezium:
// each run's topic held every row once (the round checks it), and the
// table has a row for each reader and the ratio to Debezium.
func TestSnapshotRound(t *testing.T) {
	cfg := pgTestConfig(t)
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var dbz *debeziumHarness
	switch {
	case testing.Short():
		t.Log("-short: without Debezium (a JVM's start takes seconds)")
	default:
		if dbz, err = buildDebezium(ctx); err != nil {
			t.Logf("without Debezium: %v", err)
		}
	}
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	const rows = 3000
	if err := e.fillSnapshotTable(ctx, rows, 200); err != nil {
		t.Fatal(err)
	}
	workers := []int{1, 2}
	r, err := e.snapshotRound(ctx, exe, dbz, rows, 200, 1, workers)
	if err != nil {
		t.Fatal(err)
	}
	if r.copySeconds <= 0 || r.copyBytes < rows*150 {
		t.Errorf("COPY: %.3f s, %d bytes; want a positive time and at least %d bytes", r.copySeconds, r.copyBytes, rows*150)
	}
	if c := r.ceiling; c.Rows != rows || c.Seconds <= 0 || c.CPUSeconds <= 0 {
		t.Errorf("COPY into raw franz-go: %+v; want %d rows in a positive time and CPU time", c, rows)
	}
	for _, w := range workers {
		if res, p := r.runs[w], r.procs[w]; res.Rows != rows || res.Seconds <= 0 || res.CPUSeconds <= 0 || res.RSS == 0 || p.Seconds < res.Seconds {
			t.Errorf("%d workers: %+v, process %+v; want %d rows in a positive time and CPU time, a peak RSS, and a process at least as long", w, res, p, rows)
		}
	}
	tab := snapshotTable(rows, 200, workers, []snapRound{r})
	for _, want := range []string{"| COPY (SELECT *) TO STDOUT, discarded |", "| the same COPY into raw franz-go,", "| pgcdc, 1 workers,", "| pgcdc, 2 workers,", "pgcdc ÷ the ceiling into Kafka: 1 workers "} {
		if !strings.Contains(tab, want) {
			t.Errorf("the table lacks %q:\n%s", want, tab)
		}
	}
	if dbz == nil {
		return
	}
	if d := r.debezium; d == nil || d.Snapshot <= 0 || d.Seconds < d.Snapshot || d.RSS == 0 {
		t.Errorf("Debezium: %+v, want its snapshot's time within its process's and a peak RSS", d)
	}
	if !strings.Contains(tab, "| Debezium 3.6.1 initial snapshot,") || !strings.Contains(tab, "pgcdc with 1 workers ÷ Debezium: ") {
		t.Errorf("the table lacks Debezium's row or the ratio:\n%s", tab)
	}
}
