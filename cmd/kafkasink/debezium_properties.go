package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// A Debezium Server configuration (-debezium-config) is a Java .properties
// file, read here as java.util.Properties.load reads one, and its values'
// property expressions (${NAME}, ${NAME:default}) resolved from the
// environment as Debezium Server's MicroProfile Config resolves them.

// property is one property of a .properties file, and where.
type property struct {
	key, value string
	line       int  // of the line the property starts on
	fromEnv    bool // the value is, or holds, a property expression
}

// parseProperties parses a .properties file's text: natural lines joined
// where one ends in an odd number of backslashes; blank lines and lines
// starting with # or ! skipped; the key ends at the first unescaped '=',
// ':' or white space, and one '=' or ':' amid white space separates it
// from the value; escapes \t \n \r \f \uXXXX, and a backslash before any
// other character stands for the character. A key given twice is a
// problem (Java would keep the last one silently).
func parseProperties(text string) ([]property, []string) {
	var (
		props    []property
		problems []string
		first    = make(map[string]int)
	)
	lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(text), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if continues(line) { // a continuation at the end of the file
			line = line[:len(line)-1]
		}
		rawKey, rawValue := splitProperty(line)
		key, err := unescapeProperty(rawKey)
		if err == nil {
			var value string
			if value, err = unescapeProperty(rawValue); err == nil {
				if l, dup := first[key]; dup {
					problems = append(problems, fmt.Sprintf("line %d: %s is set twice (first at line %d): keep one", start, key, l))
					continue
				}
				first[key] = start
				props = append(props, property{key: key, value: value, line: start})
				continue
			}
		}
		problems = append(problems, fmt.Sprintf("line %d: %v", start, err))
	}
	return props, problems
}

// continues reports whether a natural line continues on the next one: it
// ends in an odd number of backslashes.
func continues(line string) bool {
	n := len(line) - len(strings.TrimRight(line, `\`))
	return n%2 == 1
}

// splitProperty splits a logical line into its key and its value, both
// still escaped.
func splitProperty(line string) (key, value string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return line[:end], rest
}

// unescapeProperty resolves the escapes of a key or value.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uXXXX escape in %q: want four hexadecimal digits`, s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uXXXX escape in %q: want four hexadecimal digits`, s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// expandProperty resolves the property expressions of value: ${NAME} is
// the environment variable NAME (or, as MicroProfile Config maps property
// names to variables, NAME with every character but letters and digits
// written '_', then in upper case), ${NAME:default} falls back to default,
// and $${ is a literal ${. An expression naming a variable that is not
// set, and has no default, is an error naming it.
func expandProperty(value string, getenv func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(value, "${")
		if i < 0 {
			b.WriteString(value)
			return b.String(), nil
		}
		if i > 0 && value[i-1] == '$' { // $${: the literal ${
			b.WriteString(value[:i] + "{")
			value = value[i+2:]
			continue
		}
		end := strings.IndexByte(value[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has a ${ without its }: close the expression, or write $${ for a literal ${", value)
		}
		expr := value[i+2 : i+end]
		if v, ok, err := providedValue(expr, getenv); ok {
			if err != nil {
				return "", fmt.Errorf("${%s}: %w", expr, err)
			}
			b.WriteString(value[:i] + v)
			value = value[i+end+1:]
			continue
		}
		name, def, hasDef := strings.Cut(expr, ":")
		v := envValue(name, getenv)
		if v == "" && !hasDef {
			return "", fmt.Errorf("${%s}: the environment variable %s (or %s) is not set: set it, or give a default as ${%s:default}", name, name, envName(name), name)
		}
		if v == "" {
			v = def
		}
		b.WriteString(value[:i] + v)
		value = value[i+end+1:]
	}
}

// providedValue resolves an expression of one of Kafka's configuration
// providers, which Debezium Server files use for secrets
// (config.providers): file:PATH:KEY is KEY of the properties file PATH
// (FileConfigProvider), dir:DIR:NAME the content of the file NAME in DIR
// (DirectoryConfigProvider, as Kubernetes mounts secrets), env:NAME the
// environment variable NAME (EnvVarConfigProvider). ok is false for an
// expression of none of them.
func providedValue(expr string, getenv func(string) string) (v string, ok bool, err error) {
	provider, rest, _ := strings.Cut(expr, ":")
	switch provider {
	case "env":
		if v = getenv(rest); v == "" {
			return "", true, fmt.Errorf("the environment variable %s is not set: set it", rest)
		}
		return v, true, nil
	case "file", "dir":
	default:
		return "", false, nil
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || i == len(rest)-1 {
		return "", true, fmt.Errorf("want %s:PATH:KEY, as Kafka's %s config provider reads it", provider, provider)
	}
	path, key := rest[:i], rest[i+1:]
	if provider == "dir" {
		b, err := os.ReadFile(filepath.Join(path, key))
		return string(b), true, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", true, err
	}
	props, problems := parseProperties(string(b))
	if len(problems) > 0 {
		return "", true, fmt.Errorf("%s: %s", path, problems[0])
	}
	for _, p := range props {
		if p.key == key {
			return p.value, true, nil
		}
	}
	return "", true, fmt.Errorf("%s has no property %s: add it, or name the one it has", path, key)
}

// envValue is the environment's value for the property name: the
// variable of that name, else MicroProfile's mapping of it.
func envValue(name string, getenv func(string) string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return getenv(envName(name))
}

// envName is MicroProfile Config's environment variable for a property
// name: letters and digits kept, everything else '_', upper case.
func envName(name string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '_'
	}, name))
}
