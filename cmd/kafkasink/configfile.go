package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kafkasink/kafkasink"
)

// The configuration file (-config) is YAML: one mapping whose keys are the
// flags' names with '-' and '.' written '_' (-batch-max-wait is
// batch_max_wait, -decimal.handling.mode is decimal_handling_mode), and
// whose values are what the flag would take. kafkasink.example.yaml has
// every key. Flags win over environment variables, which win over the
// file, which wins over the defaults.
//
// The file holds no secrets, since it is usually readable by more people
// (and tools) than the process: a key for a password is refused, and so is
// a password inside pg, naming what to use instead (a file or the
// environment).

// fileValue is a value the configuration file gives, and where.
type fileValue struct {
	value string
	line  int
}

// configKey is the key of the flag name in the configuration file.
func configKey(flagName string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(flagName)
}

// fileKeys are the keys the file may have: every flag's but -config's.
func fileKeys(fs *flag.FlagSet) map[string]bool {
	keys := make(map[string]bool)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" {
			keys[configKey(f.Name)] = true
		}
	})
	return keys
}

// sequenceKeys are the keys whose flags take a comma-separated list: the
// file may give them as a YAML sequence too, one item each.
var sequenceKeys = map[string]bool{"brokers": true, "tables": true, "topic_routes": true, "annotations": true, "outbox_topics": true, "event_router_tables": true}

// loadConfigFile reads the configuration file at path: the value and line
// of each key, which must be one of keys. Every problem is reported at
// once, each with the file's name and the line.
func loadConfigFile(path string, keys map[string]bool) (map[string]fileValue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	defer f.Close()
	var doc yaml.Node
	dec := yaml.NewDecoder(f)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("-config %s: %w", path, err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("-config %s: want one YAML document, found more (a second ---)", path)
	}
	values := make(map[string]fileValue)
	if doc.Kind == 0 { // an empty file: no settings
		return values, nil
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("-config %s:%d: want a mapping of settings (key: value), found a %s", path, root.Line, kindName(root))
	}
	var problems []string
	bad := func(n *yaml.Node, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", path, n.Line)+fmt.Sprintf(format, args...))
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolve(root.Content[i+1])
		key := k.Value
		switch {
		case secretKeys[key] != "":
			bad(k, "%s: a configuration file must not hold secrets; use %s", key, secretKeys[key])
			continue
		case !keys[key]:
			bad(k, "unknown key %q%s", key, suggestion(key, keys))
			continue
		case values[key] != fileValue{}:
			bad(k, "%s is set twice (first at line %d)", key, values[key].line)
			continue
		}
		value, ok := scalarValue(v, sequenceKeys[key])
		if !ok {
			want := "a single value"
			if sequenceKeys[key] {
				want = "a value or a sequence of values"
			}
			bad(v, "%s: want %s, found a %s", key, want, kindName(v))
			continue
		}
		if key == "pg" && connStringHasPassword(value) {
			bad(v, "pg: the connection string holds a password, and a configuration file must not hold secrets; remove it and use pg_password_file (-pg-password-file) or $PGPASSWORD")
			continue
		}
		values[key] = fileValue{value: value, line: k.Line}
	}
	if problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	return values, nil
}

// resolve follows an alias (*anchor) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// scalarValue is the flag value of n: a scalar's text, or with list, the
// items of a sequence of scalars joined with commas.
func scalarValue(n *yaml.Node, list bool) (string, bool) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		return n.Value, true
	case n.Kind == yaml.SequenceNode && list:
		items := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			c = resolve(c)
			if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
				return "", false
			}
			items = append(items, c.Value)
		}
		return strings.Join(items, ", "), true
	}
	return "", false
}

func kindName(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "mapping"
	case n.Kind == yaml.SequenceNode:
		return "sequence"
	case n.Tag == "!!null":
		return "null (no value: leave the key out for the default)"
	}
	return "scalar"
}

// suggestion names the key meant by an unknown key written with dashes or
// dots, or with the flag's leading dash, or in upper case.
func suggestion(key string, keys map[string]bool) string {
	k := configKey(strings.ToLower(strings.TrimLeft(key, "-")))
	if strings.HasPrefix(k, "kafkasink_") && keys[k[len("kafkasink_"):]] {
		k = k[len("kafkasink_"):]
	}
	if keys[k] {
		return fmt.Sprintf(" (did you mean %s?)", k)
	}
	return " (see kafkasink.example.yaml for the keys)"
}
