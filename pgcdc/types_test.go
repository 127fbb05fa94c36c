package pgcdc

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden files from the current output")

// volatileFields are the parts of an encoded event that differ between
// runs (positions, transaction ids, times); the golden file pins the rest.
var volatileFields = regexp.MustCompile(`"(id|lsn|commit_lsn|xid|commit_time)":("[^"]*"|[0-9]+)`)

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
	var recs []string
	waitFor(t, 30*time.Second, "both events in the topic", done, func() bool {
		got := sinktest.ReadCommitted(t, e.brokers, topic)
		recs = recs[:0]
		for _, r := range got {
			recs = append(recs, string(r.Value))
		}
		return len(recs) == 2
	})
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, v := range recs {
		if !json.Valid([]byte(v)) {
			t.Fatalf("record %d is not valid JSON: %s", i, v)
		}
		v = volatileFields.ReplaceAllString(v, `"$1":"*"`)
		v = strings.ReplaceAll(v, e.name, "T")
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, []byte(v), "  ", "  "); err != nil {
			t.Fatal(err)
		}
		out.WriteString("  ")
		out.Write(pretty.Bytes())
		if i < len(recs)-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("]\n")

	golden := filepath.Join("testdata", "golden", "types.json")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it, then review it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the topic's JSON differs from %s (rerun with -update and review the diff):\n%s", golden, out.String())
	}
	// The update's TOASTed column is unknown, not null.
	var upd struct {
		After     map[string]any `json:"after"`
		Unchanged []string       `json:"unchanged"`
	}
	if err := json.Unmarshal([]byte(recs[1]), &upd); err != nil {
		t.Fatal(err)
	}
	if _, present := upd.After["big"]; present || len(upd.Unchanged) != 1 || upd.Unchanged[0] != "big" {
		t.Errorf("update: after has big %t, unchanged %v; want big listed as unchanged only", upd.After["big"] != nil, upd.Unchanged)
	}
}
