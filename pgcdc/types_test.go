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
// into a real PostgreSQL, streams it through pgcdc and the sink, and pins
// the JSON the topic receives. An update that leaves a TOASTed column
// unchanged shows it listed as unchanged, not as null.
func TestTypesRoundTripGolden(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.name + "_types"
	e.exec("DROP TYPE IF EXISTS " + e.name + "_mood; DROP DOMAIN IF EXISTS " + e.name + "_posint")
	e.exec("CREATE TYPE " + e.name + "_mood AS ENUM ('sad', 'happy')")
	e.exec("CREATE DOMAIN " + e.name + "_posint AS integer CHECK (VALUE > 0)")
	t.Cleanup(func() {
		e.exec("DROP TABLE IF EXISTS " + table)
		e.exec("DROP TYPE IF EXISTS " + e.name + "_mood; DROP DOMAIN IF EXISTS " + e.name + "_posint")
	})
	e.exec(`CREATE TABLE ` + table + ` (
		row_id int PRIMARY KEY,
		i2 smallint, i4 integer, i8 bigint, o oid,
		f4 real, f8 double precision, f8_nan double precision, f8_inf double precision, f8_ninf double precision,
		num numeric, num_big numeric(40,10), num_nan numeric,
		b boolean, t text, vc varchar(20), bp char(5), nm name,
		u uuid, j json, jb jsonb, by bytea,
		d date, d_inf date, ts timestamp, ts_inf timestamp, tstz timestamptz, tm time, tmtz timetz, iv interval,
		a_int int[], a_text text[], a_2d int[][], a_null int[],
		mood ` + e.name + `_mood, pos ` + e.name + `_posint, ip inet, pt point,
		nothing text, big text
	)`)
	// Out of line and uncompressed, so an update that does not touch it
	// sends it as an unchanged TOAST value.
	e.exec("ALTER TABLE " + table + " ALTER COLUMN big SET STORAGE EXTERNAL")
	sink := e.newSink(e.name)
	_, done := start(t, e.config("public."+table), sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })

	e.exec(`SET TIME ZONE 'Europe/Paris'; INSERT INTO ` + table + ` VALUES (
		1,
		-32768, 2147483647, 9223372036854775807, 4294967295,
		1.5, 0.1, 'NaN', 'Infinity', '-Infinity',
		'12345678901234567890.000000000000000001', 1234567890.0123456789, 'NaN',
		true, 'Grüße, "quotes" \ and |pipes|', 'varchar', 'ab', 'a_name',
		'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"b": 1, "a": [true, null]}', '{"b": 1, "a": [true, null]}', '\x00ff10',
		'2024-02-29', 'infinity', '2024-02-29 13:14:15.123456', '-infinity', '2024-02-29 13:14:15.5+01', '13:14:15', '13:14:15+02', '1 year 2 mons 3 days 04:05:06.5',
		'{1,2,NULL,4}', '{"a","b,c",NULL,"d\"e"}', '{{1,2},{3,4}}', NULL,
		'happy', 7, '192.168.0.1/24', '(1.5,-2)',
		NULL, repeat('x', 3000)
	)`)
	// big is TOASTed; this update does not touch it.
	e.exec("UPDATE " + table + " SET t = 'changed' WHERE row_id = 1")

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
