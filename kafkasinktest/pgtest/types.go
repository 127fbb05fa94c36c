package pgtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TypesSQL is testdata/types.sql for one test: the table of every type
// pgcdc supports, the row of them and its update, each step a statement
// list to run as one Exec (one transaction).
type TypesSQL struct {
	Table, Mood, PosInt string // the names the test's objects have

	Setup  string // the enum, the domain and the table
	Insert string // the row
	Update string // an update that leaves the TOASTed column big unchanged
	Drop   string // drops what Setup made
}

// LoadTypesSQL reads testdata/types.sql (of the root module, wherever the
// calling test's module is) with the objects named after name: the table
// name+"_types", the enum name+"_mood", the domain name+"_posint".
func LoadTypesSQL(t testing.TB, name string) TypesSQL {
	t.Helper()
	path := rootFile(t, "testdata", "types.sql")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := TypesSQL{Table: name + "_types", Mood: name + "_mood", PosInt: name + "_posint"}
	text := strings.NewReplacer("{table}", s.Table, "{mood}", s.Mood, "{posint}", s.PosInt).Replace(string(raw))
	steps := map[string]*string{"setup": &s.Setup, "insert": &s.Insert, "update": &s.Update, "drop": &s.Drop}
	var cur *string
	for _, line := range strings.SplitAfter(text, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "-- step: "); ok {
			if cur = steps[name]; cur == nil {
				t.Fatalf("pgtest: %s: unknown step %q", path, name)
			}
			continue
		}
		if cur != nil {
			*cur += line
		}
	}
	for name, step := range steps {
		if strings.TrimSpace(*step) == "" {
			t.Fatalf("pgtest: %s has no step %q", path, name)
		}
	}
	return s
}

// rootFile returns the path of a file of the root module, wherever the
// calling test's module is: two directories above this file's.
func rootFile(t testing.TB, elem ...string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatalf("pgtest: cannot locate %s: no caller information", filepath.Join(elem...))
	}
	return filepath.Join(append([]string{filepath.Dir(self), "..", ".."}, elem...)...)
}

// TypesGoldenFile is the golden file of the type test: the JSONEncoder
// values of the row's insert and update, as TypesGolden renders them.
// pgcdc's TestTypesRoundTripGolden writes it with -update; kafkasinkavro's
// Decoder must read its records back into it.
func TypesGoldenFile(t testing.TB) string {
	t.Helper()
	return rootFile(t, "pgcdc", "testdata", "golden", "types.json")
}

// volatileFields are the parts of an encoded event that differ between
// runs (positions, transaction ids, times); the golden file pins the rest.
var volatileFields = regexp.MustCompile(`"(id|lsn|commit_lsn|xid|commit_time)":("[^"]*"|[0-9]+)`)

// TypesGolden renders the type test's record values (JSONEncoder's event
// JSON) as its golden file holds them: an indented JSON array, with the
// fields that differ between runs as "*" and the test's name as T.
func TypesGolden(t testing.TB, values [][]byte, name string) []byte {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, v := range values {
		if !json.Valid(v) {
			t.Fatalf("record %d is not valid JSON: %s", i, v)
		}
		masked := strings.ReplaceAll(volatileFields.ReplaceAllString(string(v), `"$1":"*"`), name, "T")
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, []byte(masked), "  ", "  "); err != nil {
			t.Fatal(err)
		}
		out.WriteString("  ")
		out.Write(pretty.Bytes())
		if i < len(values)-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("]\n")
	return out.Bytes()
}
