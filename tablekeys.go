package kafkasink

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kafkasink/kafkasink/internal/tablename"
)

// TableKeys names the key columns of tables: each entry maps a table,
// "schema.table", to its key columns in order. A name part with a dot or
// a double quote is quoted as in SQL (see ParseTableName). It is the one
// type of Config.KeyColumns and of pgcdc's Config.KeyColumns and
// DecoderConfig.KeyColumns, with the same rules everywhere.
type TableKeys map[string][]string

// Columns returns the key columns k names for schema.table, and whether
// it names any. An entry whose name does not parse names no table (Check
// reports it).
func (k TableKeys) Columns(schema, table string) ([]string, bool) {
	for name, cols := range k {
		if s, t, err := ParseTableName(name); err == nil && s == schema && t == table {
			return cols, true
		}
	}
	return nil, false
}

// Check returns the problems of k, each starting with field (the name of
// the setting that holds it, such as "KeyColumns"): an entry whose table
// name does not parse or has no schema, two entries for one table, and an
// entry without columns or with an empty column name.
func (k TableKeys) Check(field string) []string {
	_, problems := tablename.Keyed(field, k)
	for _, name := range slices.Sorted(maps.Keys(k)) {
		if cols := k[name]; len(cols) == 0 || slices.Contains(cols, "") {
			problems = append(problems, fmt.Sprintf("%s[%q] needs at least one non-empty column name", field, name))
		}
	}
	return problems
}
