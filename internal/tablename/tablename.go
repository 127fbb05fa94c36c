// Package tablename reads and writes table names as SQL does
// ("schema.table", a part in double quotes when it must be); see
// kafkasink.ParseTableName and kafkasink.TableName, which are Parse and
// Format. Keyed reads the table names that key a setting's map.
package tablename

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Parse is kafkasink.ParseTableName.
func Parse(s string) (schema, table string, err error) {
	var parts []string
	rest := s
	for {
		part, n, err := parseIdentifier(rest)
		if err != nil {
			return "", "", fmt.Errorf("table name %q: %v", s, err)
		}
		parts = append(parts, part)
		rest = rest[n:]
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return "", "", fmt.Errorf("table name %q: unexpected %q after %q; quote a part that contains a double quote", s, rest, s[:len(s)-len(rest)])
		}
		rest = rest[1:]
	}
	switch len(parts) {
	case 1:
		return "", parts[0], nil
	case 2:
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("table name %q has %d dot-separated parts, want schema.table: quote the part that contains a dot, such as %s or %s",
		s, len(parts), Format(parts[0], strings.Join(parts[1:], ".")), Format(strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]))
}

// parseIdentifier reads one part of a table name at the start of s and
// returns it with the number of bytes it took.
func parseIdentifier(s string) (string, int, error) {
	if !strings.HasPrefix(s, `"`) {
		n := strings.IndexByte(s, '.')
		if n < 0 {
			n = len(s)
		}
		part := s[:n]
		switch {
		case part == "":
			return "", 0, fmt.Errorf("a part is empty (a dot at an end, or two in a row)")
		case strings.Contains(part, `"`):
			return "", 0, fmt.Errorf("part %q has a double quote: quote the whole part, doubling the quote inside", part)
		case strings.TrimSpace(part) != part:
			return "", 0, fmt.Errorf("part %q starts or ends with a space: quote it if the space belongs to the name", part)
		}
		return part, n, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		if b.Len() == 0 {
			return "", 0, fmt.Errorf("empty quoted part")
		}
		return b.String(), i + 1, nil
	}
	return "", 0, fmt.Errorf("unterminated double quote")
}

// Format is kafkasink.TableName.
func Format(schema, table string) string {
	if schema == "" {
		return quotePart(table)
	}
	return quotePart(schema) + "." + quotePart(table)
}

func quotePart(s string) string {
	plain := s != "" && !(s[0] >= '0' && s[0] <= '9')
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if plain {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Keyed returns m, whose keys are table names, keyed by (schema, table),
// and the problems of its keys: names Parse refuses or that have no
// schema, and two keys naming one table (such as public.a and
// public."a"). field names m in problems.
func Keyed[V any](field string, m map[string]V) (map[[2]string]V, []string) {
	out := make(map[[2]string]V, len(m))
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		schema, table, err := Parse(name)
		if err == nil && schema == "" {
			err = fmt.Errorf("table name %q has no schema: want schema.table", name)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s key: %v", field, err))
			continue
		}
		k := [2]string{schema, table}
		if _, dup := out[k]; dup {
			problems = append(problems, fmt.Sprintf("%s has two keys for table %s", field, Format(schema, table)))
		}
		out[k] = m[name]
	}
	return out, problems
}
