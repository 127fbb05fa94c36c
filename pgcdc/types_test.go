package pgcdc

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden files from the current output")

// TestTypesRoundTripGolden inserts one row holding every supported type
// into a real PostgreSQL (testdata/types.sql of the root module, which
// kafkasinkavro's TestTypesRoundTrip streams too), streams it through
// pgcdc and the sink, and pins the JSON the topic receives. An update that
// leaves a TOASTed column unchanged shows it listed as unchanged, not as
// null.
func TestTypesRoundTripGolden(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	sql := sinktest.LoadTypesSQL(t, e.name)
	table := sql.Table
	e.exec(sql.Drop)
	e.exec(sql.Setup)
	t.Cleanup(func() { e.exec(sql.Drop) })
	sink := e.newSink(e.name)
	_, done := start(t, e.config("public."+table), sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })

	e.exec(sql.Insert)
	e.exec(sql.Update)

	topic := "t.public." + table
	var recs [][]byte
	waitFor(t, 30*time.Second, "both events in the topic", done, func() bool {
		got := sinktest.ReadCommitted(t, e.brokers, topic)
		recs = recs[:0]
		for _, r := range got {
			recs = append(recs, r.Value)
		}
		return len(recs) == 2
	})
	out := sinktest.TypesGolden(t, recs, e.name)
	golden := sinktest.TypesGoldenFile(t)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it, then review it)", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("the topic's JSON differs from %s (rerun with -update and review the diff):\n%s", golden, out)
	}
	// The update's TOASTed column is unknown, not null.
	var upd struct {
		After     map[string]any `json:"after"`
		Unchanged []string       `json:"unchanged"`
	}
	if err := json.Unmarshal(recs[1], &upd); err != nil {
		t.Fatal(err)
	}
	if _, present := upd.After["big"]; present || len(upd.Unchanged) != 1 || upd.Unchanged[0] != "big" {
		t.Errorf("update: after has big %t, unchanged %v; want big listed as unchanged only", upd.After["big"] != nil, upd.Unchanged)
	}
}
