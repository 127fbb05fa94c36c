package main

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// captureLists are the flags of pgcdc's include and exclude lists, named
// and written as Debezium's properties: comma-separated regular
// expressions, a comma inside one escaped as \,.
type captureLists struct {
	schemaIn, schemaEx, tableIn, tableEx, columnIn, columnEx string
}

// defineFlags defines the lists' flags, which set l.
func (l *captureLists) defineFlags(f flagDefiner) {
	const how = "comma-separated regular expressions, each matching a whole name case-insensitively, as Debezium's property of the same name (a comma inside one written \\,)"
	f.str(&l.schemaIn, "schema.include.list", "KAFKASINK_SCHEMA_INCLUDE_LIST", "", "capture only the published tables of the schemas matching: "+how+"; conflicts with -schema.exclude.list")
	f.str(&l.schemaEx, "schema.exclude.list", "KAFKASINK_SCHEMA_EXCLUDE_LIST", "", "do not capture the tables of the schemas matching: "+how)
	f.str(&l.tableIn, "table.include.list", "KAFKASINK_TABLE_INCLUDE_LIST", "", "capture only the published tables whose schema.table matches: "+how+"; conflicts with -table.exclude.list")
	f.str(&l.tableEx, "table.exclude.list", "KAFKASINK_TABLE_EXCLUDE_LIST", "", "do not capture the tables whose schema.table matches: "+how)
	f.str(&l.columnIn, "column.include.list", "KAFKASINK_COLUMN_INCLUDE_LIST", "", "deliver only the columns whose schema.table.column matches (key columns must be kept): "+how+"; conflicts with -column.exclude.list")
	f.str(&l.columnEx, "column.exclude.list", "KAFKASINK_COLUMN_EXCLUDE_LIST", "", "leave out the columns whose schema.table.column matches (not key columns): "+how)
}

// set gives c the lists, and returns the problems of their syntax; the
// regular expressions are checked by pgcdc's Config.Validate.
func (l captureLists) set(c *pgcdc.Config) []string {
	var problems []string
	for _, f := range []struct {
		flag, value string
		to          *[]string
	}{
		{"schema.include.list", l.schemaIn, &c.SchemaIncludeList},
		{"schema.exclude.list", l.schemaEx, &c.SchemaExcludeList},
		{"table.include.list", l.tableIn, &c.TableIncludeList},
		{"table.exclude.list", l.tableEx, &c.TableExcludeList},
		{"column.include.list", l.columnIn, &c.ColumnIncludeList},
		{"column.exclude.list", l.columnEx, &c.ColumnExcludeList},
	} {
		items, err := splitRegexList(f.value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("-%s %q: %v", f.flag, f.value, err))
		}
		*f.to = items
	}
	return problems
}

// splitRegexList splits a list of regular expressions as Debezium's
// Strings.RegExSplitter does: at each comma not escaped by a backslash
// (a backslash escapes the character after it), each item trimmed, empty
// ones dropped, and \, written ",".
func splitRegexList(s string) ([]string, error) {
	var items []string
	start := 0
	add := func(item string) {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, strings.ReplaceAll(item, `\,`, ","))
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("ends in a backslash, which escapes nothing: remove it or double it")
			}
			i++
		case ',':
			add(s[start:i])
			start = i + 1
		}
	}
	add(s[start:])
	return items, nil
}
