package registry

import (
	"fmt"
	"slices"
	"strings"
)

// Column is a column as the message of a refused schema describes it:
// its name and its type in the schema ("NOT NULL int").
type Column struct{ Name, Type string }

// Changes describes how cols differ from prev, for the message of a
// refused schema: ", the columns: added "x" (NOT NULL int); changed "y"
// from int to string; dropped "z"", or "" when none did.
func Changes(prev, cols []Column) string {
	var out []string
	for _, c := range cols {
		j := slices.IndexFunc(prev, func(o Column) bool { return o.Name == c.Name })
		switch {
		case j < 0:
			out = append(out, fmt.Sprintf("added %q (%s)", c.Name, c.Type))
		case prev[j].Type != c.Type:
			out = append(out, fmt.Sprintf("changed %q from %s to %s", c.Name, prev[j].Type, c.Type))
		}
	}
	for _, o := range prev {
		if !slices.ContainsFunc(cols, func(c Column) bool { return c.Name == o.Name }) {
			out = append(out, fmt.Sprintf("dropped %q", o.Name))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ", the columns: " + strings.Join(out, "; ")
}
