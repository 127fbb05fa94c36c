package sinktest

import (
	"os"
	"path/filepath"
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
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("sinktest: cannot locate testdata/types.sql: no caller information")
	}
	path := filepath.Join(filepath.Dir(self), "..", "..", "testdata", "types.sql")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("sinktest: %v", err)
	}
	s := TypesSQL{Table: name + "_types", Mood: name + "_mood", PosInt: name + "_posint"}
	text := strings.NewReplacer("{table}", s.Table, "{mood}", s.Mood, "{posint}", s.PosInt).Replace(string(raw))
	steps := map[string]*string{"setup": &s.Setup, "insert": &s.Insert, "update": &s.Update, "drop": &s.Drop}
	var cur *string
	for _, line := range strings.SplitAfter(text, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "-- step: "); ok {
			if cur = steps[name]; cur == nil {
				t.Fatalf("sinktest: %s: unknown step %q", path, name)
			}
			continue
		}
		if cur != nil {
			*cur += line
		}
	}
	for name, step := range steps {
		if strings.TrimSpace(*step) == "" {
			t.Fatalf("sinktest: %s has no step %q", path, name)
		}
	}
	return s
}
