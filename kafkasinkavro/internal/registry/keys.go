package registry

import (
	"fmt"

	"github.com/kafkasink/kafkasink"
)

// Pick returns the elements of cols named names, in the order of names
// (name gives an element's name), for a key schema made of a row's
// columns; missing is the first of names cols lacks, "" when none.
func Pick[C any](cols []C, name func(C) string, names []string) (picked []C, missing string) {
	picked = make([]C, len(names))
	for i, n := range names {
		j := 0
		for j < len(cols) && name(cols[j]) != n {
			j++
		}
		if j == len(cols) {
			return nil, n
		}
		picked[i] = cols[j]
	}
	return picked, ""
}

// KeyColumnError is the PrepareError of pkg's encoder for a key column
// (kafkasink.Config.KeyColumns) that e's table does not have.
func KeyColumnError(pkg string, e *kafkasink.Event, column string) error {
	return &kafkasink.PrepareError{Err: fmt.Errorf("%s: key column %q is not a column of %s; fix kafkasink.Config.KeyColumns (-key-columns) for the table",
		pkg, column, kafkasink.TableName(e.Schema, e.Table))}
}
