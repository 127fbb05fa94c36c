package main

import (
	"context"
	"strings"
	"testing"
)

// TestBackfillRound runs one -backfill round on a small table of the
// integration environment: each phase read what it must (every row; under
// load at most every row), the topic held what Run wrote, once (the
// round checks it), and the table shows both ratios.
func TestBackfillRound(t *testing.T) {
	cfg := pgTestConfig(t)
	ctx := context.Background()
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if err := e.createTable(ctx); err != nil {
		t.Fatal(err)
	}
	const rows = 3000
	if err := e.insertRows(ctx, 1, rows, 200); err != nil {
		t.Fatal(err)
	}
	r, err := e.backfillRound(ctx, 0, rows, 200, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]bfPhase{"snapshot": r.snapshot, "idle": r.idle, "loaded": r.loaded} {
		if p.reads == 0 || p.reads > rows || p.seconds <= 0 {
			t.Errorf("%s: %+v, want up to %d rows read in a positive time", name, p, rows)
		}
	}
	if r.snapshot.reads != rows || r.idle.reads != rows || r.loaded.changes == 0 {
		t.Errorf("snapshot %d rows, idle backfill %d, changes during the loaded one %d; want %d, %d and some", r.snapshot.reads, r.idle.reads, r.loaded.changes, rows, rows)
	}
	if tab := backfillTable(rows, 200, 1000, []bfRound{r}); !strings.Contains(tab, "median ratio to the initial snapshot: idle ") {
		t.Errorf("the table lacks the ratios:\n%s", tab)
	}
}
