package pgcdc

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/kafkasink/kafkasink"
)

// The include and exclude lists (Config.SchemaIncludeList, ...) follow
// Debezium's matching rules (io.debezium.function.Predicates.includes):
// each item is a regular expression that must match the whole identifier,
// case-insensitively; a schema is matched by its name, a table by
// "schema.table", a column by "schema.table.column", all as stored (not
// quoted). A table is captured when its schema passes the schema lists and
// it passes the table lists; an include list and the exclude list of the
// same kind cannot both be set, as in Debezium.

// captureFilter decides which tables and columns Run captures. The zero
// value, and a nil one, capture everything. It is safe for concurrent use.
type captureFilter struct {
	schemaIn, schemaEx, tableIn, tableEx, columnIn, columnEx []*regexp.Regexp

	mu        sync.Mutex
	relations map[*kafkasink.Relation]*kafkasink.Relation // each streamed Relation, filtered
}

// filterLists names the lists of one kind, for errors.
var filterLists = []struct{ include, exclude string }{
	{"SchemaIncludeList", "SchemaExcludeList"},
	{"TableIncludeList", "TableExcludeList"},
	{"ColumnIncludeList", "ColumnExcludeList"},
}

// newCaptureFilter compiles cfg's include and exclude lists, and returns
// nil when none is set. Each problem names the list and the item.
func newCaptureFilter(cfg *Config) (*captureFilter, []string) {
	lists := [][2][]string{
		{cfg.SchemaIncludeList, cfg.SchemaExcludeList},
		{cfg.TableIncludeList, cfg.TableExcludeList},
		{cfg.ColumnIncludeList, cfg.ColumnExcludeList},
	}
	var problems []string
	var compiled [6][]*regexp.Regexp
	any := false
	for i, l := range lists {
		names := filterLists[i]
		if len(l[0]) > 0 && len(l[1]) > 0 {
			problems = append(problems, fmt.Sprintf("pgcdc: Config.%s and Config.%s are both set: give one of them, as Debezium requires", names.include, names.exclude))
		}
		for j, name := range []string{names.include, names.exclude} {
			for _, item := range l[j] {
				re, err := regexp.Compile(`(?i)^(?:` + item + `)$`)
				if err != nil {
					problems = append(problems, fmt.Sprintf("pgcdc: Config.%s item %q is not a regular expression Go accepts (RE2: no lookaround, no backreferences): %v", name, item, err))
					continue
				}
				compiled[2*i+j] = append(compiled[2*i+j], re)
				any = true
			}
		}
	}
	if !any {
		return nil, problems
	}
	return &captureFilter{
		schemaIn: compiled[0], schemaEx: compiled[1],
		tableIn: compiled[2], tableEx: compiled[3],
		columnIn: compiled[4], columnEx: compiled[5],
		relations: make(map[*kafkasink.Relation]*kafkasink.Relation),
	}, problems
}

// passes reports whether s passes an include list in and an exclude list
// ex: at most one of them is set, and an empty one passes everything.
func passes(s string, in, ex []*regexp.Regexp) bool {
	matches := func(re *regexp.Regexp) bool { return re.MatchString(s) }
	switch {
	case len(in) > 0:
		return slices.ContainsFunc(in, matches)
	case len(ex) > 0:
		return !slices.ContainsFunc(ex, matches)
	}
	return true
}

// table reports whether the table schema.table is captured.
func (f *captureFilter) table(schema, table string) bool {
	if f == nil {
		return true
	}
	return passes(schema, f.schemaIn, f.schemaEx) && passes(schema+"."+table, f.tableIn, f.tableEx)
}

// column reports whether the column of schema.table is captured.
func (f *captureFilter) column(schema, table, column string) bool {
	if f == nil {
		return true
	}
	return passes(schema+"."+table+"."+column, f.columnIn, f.columnEx)
}

// apply is DecoderConfig.Capture: it drops the event of a table not
// captured, and removes the columns not captured from a captured one's
// rows and Relation. A key column the column lists leave out is refused:
// Debezium keeps it in the key and drops it from the value, which the
// sink, deriving the key from the row, cannot do.
func (f *captureFilter) apply(e *kafkasink.Event) (bool, error) {
	if f == nil {
		return true, nil
	}
	if !f.table(e.Schema, e.Table) {
		return false, nil
	}
	if len(f.columnIn) == 0 && len(f.columnEx) == 0 {
		return true, nil
	}
	for _, k := range e.Key {
		if !f.column(e.Schema, e.Table, k) {
			return false, f.keyColumnError(e.Schema, e.Table, k)
		}
	}
	keep := func(name string) bool { return f.column(e.Schema, e.Table, name) }
	e.Before = filterRow(e.Before, keep)
	e.After = filterRow(e.After, keep)
	if e.Relation != nil {
		e.Relation = f.relation(e.Relation, keep)
	}
	return true, nil
}

// keyColumnError is the refusal of a key column left out by the column
// lists.
func (f *captureFilter) keyColumnError(schema, table, column string) error {
	return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
		"pgcdc: Config.ColumnIncludeList or Config.ColumnExcludeList leaves out %s.%s.%s, a key column of its table: "+
			"Debezium would keep it in the record's key and drop it from the value, which pgcdc cannot: keep the key columns in the capture, "+
			"or key the table by other columns (Config.KeyColumns)", schema, table, column)}}
}

// filterRow returns the columns of r that keep accepts, r itself when it
// accepts all.
func filterRow(r kafkasink.Row, keep func(string) bool) kafkasink.Row {
	if slices.IndexFunc(r, func(c kafkasink.Column) bool { return !keep(c.Name) }) < 0 {
		return r
	}
	out := make(kafkasink.Row, 0, len(r))
	for _, c := range r {
		if keep(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// relation returns rel without the columns keep refuses, made once per
// Relation (the decoder shares one between the events of a table).
func (f *captureFilter) relation(rel *kafkasink.Relation, keep func(string) bool) *kafkasink.Relation {
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.relations[rel]; ok {
		return out
	}
	out := &kafkasink.Relation{}
	for _, c := range rel.Columns {
		if keep(c.Name) {
			out.Columns = append(out.Columns, c)
		}
	}
	f.relations[rel] = out
	f.relations[out] = out // a Write retried with the same events
	return out
}

// capturedTables is the tables of published that f captures.
func (f *captureFilter) capturedTables(published []publishedTable) []publishedTable {
	if f == nil {
		return published
	}
	return slices.DeleteFunc(slices.Clone(published), func(p publishedTable) bool { return !f.table(p.schema, p.table) })
}

// captures is DecoderConfig.Captures for f: nil, capturing every table,
// when f is nil.
func (f *captureFilter) captures() func(schema, table string) bool {
	if f == nil {
		return nil
	}
	return f.table
}

// events returns the events f captures, their rows and Relations without
// the columns it leaves out: events itself when it captures all.
func (f *captureFilter) events(events []kafkasink.Event) ([]kafkasink.Event, error) {
	if f == nil {
		return events, nil
	}
	out := make([]kafkasink.Event, 0, len(events))
	for i := range events {
		keep, err := f.apply(&events[i])
		if err != nil {
			return nil, err
		}
		if keep {
			out = append(out, events[i])
		}
	}
	return out, nil
}

// capturedTables reads the publication's tables that the include and
// exclude lists capture: those the snapshot and the backfills read.
func (r *runner) capturedTables(ctx context.Context, q querier) ([]publishedTable, error) {
	published, err := publishedTables(ctx, q, r.cfg.Publication)
	if err != nil {
		return nil, err
	}
	return r.filter.capturedTables(published), nil
}
