package main

import (
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// libraryStructs are the library's configuration types whose field names
// its validations use, under the names its messages give them.
var libraryStructs = map[string]reflect.Type{
	"Config":          reflect.TypeFor[kafkasink.Config](),
	"Topics":          reflect.TypeFor[kafkasink.Topics](),
	"TLS":             reflect.TypeFor[kafkasink.TLS](),
	"SASL":            reflect.TypeFor[kafkasink.SASL](),
	"pgcdc.Config":    reflect.TypeFor[pgcdc.Config](),
	"LeaseConfig":     reflect.TypeFor[pgcdc.LeaseConfig](),
	"Outbox":          reflect.TypeFor[pgcdc.Outbox](),
	"EventRouter":     reflect.TypeFor[pgcdc.EventRouter](),
	"DebeziumEncoder": reflect.TypeFor[debezium.Encoder](),
	"avro.Config":     reflect.TypeFor[kafkasinkavro.Config](),
}

// libraryValues are the library's constants that its messages name as a
// field's value, and that libraryNames translates.
var libraryValues = map[string]any{
	"KeyJSON":         kafkasink.KeyJSON,
	"AnnotateValue":   kafkasink.AnnotateValue,
	"AnnotateHeaders": kafkasink.AnnotateHeaders,
	"AnnotateBoth":    kafkasink.AnnotateBoth,
}

// libraryFieldNames are the exported field names of libraryStructs.
func libraryFieldNames() map[string]bool {
	names := make(map[string]bool)
	for _, typ := range libraryStructs {
		for f := range typ.Fields() {
			if f.IsExported() {
				names[f.Name] = true
			}
		}
	}
	return names
}

// TestLibraryNamesAreFieldsAndFlags keeps libraryNames true: each name is
// a field of a library Config (the qualified ones of the struct they
// qualify with) or one of libraryValues, the type itself
// (DebeziumEncoder), and each flag its translation names is a flag of
// the program. A renamed field or flag fails here, not in front of an
// operator.
func TestLibraryNamesAreFieldsAndFlags(t *testing.T) {
	fields := libraryFieldNames()
	for _, n := range libraryNames {
		qualifier, field, qualified := strings.Cut(n.name, ".")
		switch {
		case qualified:
			typ, ok := libraryStructs[qualifier]
			if _, has := typ.FieldByName(field); !ok || !has {
				t.Errorf("libraryNames: %s is not a field of the library's %s", n.name, qualifier)
			}
		case libraryStructs[n.name] != nil, libraryValues[n.name] != nil, fields[n.name]:
		default:
			t.Errorf("libraryNames: %s is neither a field of the library's Configs nor one of libraryValues", n.name)
		}
		for _, m := range regexp.MustCompile(`(?:^|\s|\()-([a-z][a-z0-9.-]*[a-z0-9])`).FindAllStringSubmatch(n.program, -1) {
			if _, ok := flagSettings[m[1]]; !ok {
				t.Errorf("libraryNames: %s becomes %q, but -%s is not a flag", n.name, n.program, m[1])
			}
		}
	}
}

// badForLibrary are configurations that each library validation the
// program calls refuses, one for each message the program can reach (the
// others need settings the program does not offer), with a part of the
// message in the program's terms.
func badForLibrary(t *testing.T) []struct {
	args []string
	want string
} {
	dir := t.TempDir()
	notPEM := writeFile(t, "not.pem", "no certificate here\n")
	registry := []string{"-schema-registry", "http://127.0.0.1:1"}
	return []struct {
		args []string
		want string
	}{
		// kafkasink.Config.Validate
		{[]string{"-brokers", ""}, "-brokers is empty: give at least one host:port"},
		{[]string{"-brokers", "a:9092 b:9092"}, `-brokers has "a:9092 b:9092": want one host:port per entry`},
		{[]string{"-sink-id", "a/b"}, `-sink-id "a/b": use at most 200 bytes of [a-zA-Z0-9._-]`},
		{[]string{"-transaction-timeout", "500ms"}, "-transaction-timeout 500ms: want between 1s"},
		{[]string{"-transaction-timeout", "-3s"}, "the commit timeout (a third of -transaction-timeout) -1s must be positive and below -transaction-timeout -3s"},
		{[]string{"-checkpoint-topic", "a/b"}, "-checkpoint-topic: topic name \"a/b\""},
		{[]string{"-dead-letter-topic", "a/b"}, "-dead-letter-topic: topic name \"a/b\""},
		{[]string{"-dead-letter-topic", "cp", "-checkpoint-topic", "cp"}, `-dead-letter-topic and -checkpoint-topic are both "cp": use separate topics`},
		{[]string{"-encoder", "debezium", "-provide.transaction.metadata", "-transaction.topic", "cp", "-checkpoint-topic", "cp"}, `"cp" is also -checkpoint-topic or -dead-letter-topic`},
		{[]string{"-encoder", "debezium", "-provide.transaction.metadata", "-transaction.topic", "a/b"}, `-transaction.topic "a/b"`},
		{[]string{"-encoder", "debezium", "-skipped.operations", "x"}, `-skipped.operations "x" is not valid`},
		{[]string{"-topic-prefix", "p", "-topic-template", "t.{table}"}, "-topic-template and -topic-prefix are both set: use one"},
		{[]string{"-topic-template", "t.{tabel}"}, `-topic-template "t.{tabel}" has an unknown placeholder`},
		{[]string{"-topic-template", "t/{table}"}, "-topic-template: topic name"},
		{[]string{"-topic-prefix", "bad/prefix"}, `-topic-prefix: topic name "bad/prefix"`},
		{[]string{"-topic-routes", "public.t=a/b"}, `-topic-routes["public.t"]: topic name "a/b"`},
		{[]string{"-topic-routes", "t=a"}, `-topic-routes key: table name "t" has no schema`},
		{[]string{"-topic-routes", `public.t=a,public."t"=b`}, "-topic-routes has two keys for table public.t"},
		{[]string{"-partitions", "-5"}, "-partitions -5: want a positive count"},
		{[]string{"-replication-factor", "-5"}, "-replication-factor -5: want a positive factor"},
		{[]string{"-annotations-in", "headers"}, "-annotations-in is headers but -annotations is empty"},
		{[]string{"-annotations", "=v"}, "-annotations has an empty key"},
		{[]string{"-annotations", strings.Repeat("k", 200) + "=v"}, "is 200 bytes: use at most 128"},
		{[]string{"-annotations", "a b=v"}, `-annotations key "a b" has characters outside [a-zA-Z0-9._-]`},
		{[]string{"-annotations", "kafkasink.x=v"}, `-annotations key "kafkasink.x" starts with "kafkasink."`},
		{[]string{"-annotations", "k=\xff"}, `-annotations["k"] is not valid UTF-8`},
		{[]string{"-encoder", "debezium", "-annotations", "k=v"}, "set -debezium-annotations to add one"},
		{append([]string{"-encoder", "avro", "-annotations", "k=v"}, registry...), "-annotations-in headers"},
		{[]string{"-tls-cert", notPEM}, "-tls-cert and -tls-key must be given together"},
		{[]string{"-tls-ca", dir + "/missing.pem"}, "-tls-ca: open " + dir + "/missing.pem"},
		{[]string{"-tls-ca", notPEM}, "-tls-ca (" + notPEM + "): no PEM certificate found"},
		{[]string{"-tls-cert", notPEM, "-tls-key", notPEM}, "-tls-cert and -tls-key (" + notPEM},
		{[]string{"-sasl-mechanism", "scram-sha-512"}, "SASL SCRAM-SHA-512 needs -sasl-user and a password (-sasl-password-file or $KAFKASINK_SASL_PASSWORD)"},
		{[]string{"-sasl-mechanism", "plain", "-sasl-user", "u", "-sasl-password-file", writeFile(t, "pw", "pw\n")}, "SASL PLAIN without TLS sends the password in clear text: set -tls-ca (or another -tls-* flag)"},
		// kafkasinkavro's and jsonschema's New
		{append([]string{"-encoder", "avro", "-schema-registry-namespace", "db1"}, registry...), `-schema-registry-namespace "db1" applies to the RecordName and TopicRecordName subject strategies only`},
		{append([]string{"-encoder", "json-schema", "-schema-registry-namespace", "db1"}, registry...), `-schema-registry-namespace "db1" applies to the RecordName and TopicRecordName subject strategies only`},
		{append([]string{"-encoder", "avro", "-schema-registry-subjects", "RecordNameStrategy", "-schema-registry-namespace", "db-1"}, registry...), `-schema-registry-namespace "db-1" is not an Avro namespace`},
		{append([]string{"-encoder", "debezium-avro", "-schema-registry-subjects", "RecordNameStrategy", "-schema-registry-namespace", "db1"}, registry...), `-schema-registry-namespace "db1" does not apply to -encoder debezium-avro`},
		// pgcdc.Config.Validate
		{[]string{"-pg", ""}, "-pg is required"},
		{[]string{"-pg", "postgres://h:port/db"}, "-pg does not parse"},
		{[]string{"-slot", "", "-sink-id", "s"}, "-slot is required"},
		{[]string{"-slot", "My-Slot"}, `-slot "My-Slot" is not a valid replication slot name`},
		{[]string{"-publication", ""}, "-publication is required"},
		{[]string{"-publication", strings.Repeat("p", 64)}, "is longer than 63 bytes"},
		{[]string{"-tables", "a.b.c"}, `-tables: table name "a.b.c" has 3 dot-separated parts`},
		{[]string{"-batch-max-events", "-1"}, "-batch-max-events -1 is negative: use 0 for the default"},
		{[]string{"-batch-max-bytes", "-1"}, "-batch-max-bytes -1 is negative: use 0 for the default"},
		{[]string{"-batch-max-wait", "-1s"}, "-batch-max-wait -1s is negative: use 0 for the default"},
		{[]string{"-outbox-topics", "orders events"}, `-outbox-topics entry "orders events": topic name "orders events" has characters outside [a-zA-Z0-9._-]`},
		{[]string{"-outbox-topics", "t", "-outbox-prefix", "kafkasink.heartbeat"}, `-outbox-prefix "kafkasink.heartbeat" is the heartbeats' prefix`},
		{[]string{"-outbox-topics", "t", "-outbox-max-bytes", "-1"}, "-outbox-max-bytes -1 is negative"},
		{[]string{"-event-router-tables", "public.outbox", "-event-router", "route.by.feld=x"}, `-event-router: "route.by.feld" is not supported`},
		{[]string{"-event-router-tables", "public.outbox", "-snapshot"}, "-event-router-tables and -snapshot are both set"},
		// pgcdc.LeaseConfig.Validate
		{[]string{"-lease-timeout", "500ms"}, "-lease-timeout 500ms is below one second"},
	}
}

// quotedValue is a Go-quoted string.
var quotedValue = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// TestNoLibraryNamesReachTheUser drives every library validation message
// the program can reach (badForLibrary) and fails on a library field
// name, a Config qualifier, or a message the program did not translate.
func TestNoLibraryNamesReachTheUser(t *testing.T) {
	fields := libraryFieldNames()
	// Words that are also the program's plain English, checked in their
	// qualified forms only.
	for _, w := range []string{"TLS", "SASL", "Registry"} {
		delete(fields, w)
	}
	var leaks []*regexp.Regexp
	for f := range fields {
		leaks = append(leaks, regexp.MustCompile(`\b`+f+`\b`))
	}
	// And any Go-style qualified name (Type.Field, pkg.Type.Method).
	leaks = append(leaks, regexp.MustCompile(`\b[A-Z][A-Za-z]*\.[A-Z][A-Za-z]*\b`), regexp.MustCompile(`\bDebeziumEncoder\b`))
	base := []string{"-pg", "postgres://cdc@127.0.0.1:1/db", "-brokers", "127.0.0.1:1"}
	for _, tc := range badForLibrary(t) {
		o, err := parse(append(slices.Clone(base), tc.args...), noEnv, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		_, _, err = o.configs(nil)
		if err == nil {
			t.Errorf("%q was accepted", tc.args)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %s\nwant it to say %s", tc.args, msg, tc.want)
		}
		// A quoted value is the user's ("My-Slot"), not a name.
		unquoted := quotedValue.ReplaceAllString(msg, `""`)
		for _, re := range leaks {
			if loc := re.FindStringIndex(unquoted); loc != nil {
				t.Errorf("%q: %s\nnames the library's %s", tc.args, msg, unquoted[loc[0]:loc[1]])
			}
		}
		for _, p := range problemsOf(err) {
			if !strings.Contains(p, whereMark) {
				t.Errorf("%q: problem %q does not say where its flag is set", tc.args, p)
			}
		}
	}
}
