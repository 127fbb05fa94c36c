package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// debeziumSample is the Debezium Server configuration of Debezium's
// documentation (operations/debezium-server.adoc, "An example
// configuration file"), its sink made the Kafka sink as the
// documentation's Apache Kafka section requires (type, bootstrap.servers,
// key.serializer, value.serializer) and plugin.name=pgoutput as it says to
// for pgoutput: testdata/debezium-server/application.properties.
const debeziumSampleFile = "testdata/debezium-server/application.properties"

// debeziumFile is a Debezium Server file for PostgreSQL and Kafka at addr
// (host:port), changed by edits: "key=value" replaces the property or
// adds it, "-key" removes it.
func debeziumFile(addr string, edits ...string) string {
	host, port, _ := net.SplitHostPort(addr)
	lines := []string{
		"debezium.sink.type=kafka",
		"debezium.sink.kafka.producer.bootstrap.servers=" + addr,
		"debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer",
		"debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer",
		"debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector",
		"debezium.source.database.hostname=" + host,
		"debezium.source.database.port=" + port,
		"debezium.source.database.user=cdc",
		"debezium.source.database.password=hunter2",
		"debezium.source.database.dbname=db",
		"debezium.source.topic.prefix=tutorial",
		"debezium.source.plugin.name=pgoutput",
	}
	added := make(map[string]bool) // by an edit: a second edit adds it again
	for _, e := range edits {
		if key, ok := strings.CutPrefix(e, "-"); ok {
			lines = removeProperty(lines, key)
			continue
		}
		key, _, _ := strings.Cut(e, "=")
		if i := propertyIndex(lines, key); i >= 0 && !added[key] {
			lines[i] = e
		} else {
			lines = append(lines, e)
		}
		added[key] = true
	}
	return strings.Join(lines, "\n") + "\n"
}

func propertyIndex(lines []string, key string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, key+"=") {
			return i
		}
	}
	return -1
}

func removeProperty(lines []string, key string) []string {
	if i := propertyIndex(lines, key); i >= 0 {
		return append(lines[:i], lines[i+1:]...)
	}
	return lines
}

// TestParseProperties pins java.util.Properties.load's syntax: the
// separators, comments, white space, line continuations and escapes.
func TestParseProperties(t *testing.T) {
	text := "# a comment\n" +
		"! another\n" +
		"\n" +
		"   a=1\n" +
		"b : 2\n" +
		"c 3\n" +
		"d\t=\t 4 \n" + // trailing white space is kept
		"e=five \\\n" + // continued: the next line's leading space dropped
		"     and a half\r\n" +
		"f=\\\\\n" + // an even number of backslashes: no continuation
		"g=x\\u0041\\t\\=\\:\\#y\n" +
		"h\\ key=v\n" +
		"i\n" + // a key without a value
		"j=#not a comment\n" +
		"k=a=b\n"
	props, problems := parseProperties(text)
	if problems != nil {
		t.Fatal(problems)
	}
	want := []property{
		{key: "a", value: "1", line: 4}, {key: "b", value: "2", line: 5}, {key: "c", value: "3", line: 6},
		{key: "d", value: "4 ", line: 7}, {key: "e", value: "five and a half", line: 8}, {key: "f", value: `\`, line: 10},
		{key: "g", value: "xA\t=:#y", line: 11}, {key: "h key", value: "v", line: 12}, {key: "i", value: "", line: 13},
		{key: "j", value: "#not a comment", line: 14}, {key: "k", value: "a=b", line: 15},
	}
	if !slices.Equal(props, want) {
		t.Fatalf("parsed\n%v\nwant\n%v", props, want)
	}
}

// TestExpandProperty pins the property expressions: a variable, its
// MicroProfile name, a default, the $${ escape, and the errors.
func TestExpandProperty(t *testing.T) {
	env := map[string]string{"PGPASSWORD": "pw", "DB_USER": "cdc"}
	getenv := func(k string) string { return env[k] }
	for in, want := range map[string]string{
		"${PGPASSWORD}":         "pw",
		"${db.user}":            "cdc",
		"${NOPE:fallback}":      "fallback",
		"a${PGPASSWORD}b$${x}c": "apwb${x}c",
		"plain":                 "plain",
	} {
		if got, err := expandProperty(in, getenv); err != nil || got != want {
			t.Errorf("expandProperty(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"${NOPE}":  "the environment variable NOPE (or NOPE) is not set",
		"${NOPE":   "has a ${ without its }",
		"${a.b-c}": "the environment variable a.b-c (or A_B_C) is not set",
	} {
		if _, err := expandProperty(in, getenv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("expandProperty(%q) = %v; want an error saying %q", in, err, want)
		}
	}
}

// TestExpandConfigProviders pins the expressions of Kafka's file, dir and
// env config providers, with which Debezium Server files keep secrets out
// of the file, and their errors.
func TestExpandConfigProviders(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "db.properties")
	if err := os.WriteFile(secrets, []byte("user=cdc\npassword = s3cret:x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgpassword"), []byte("from-dir"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"PGPASSWORD": "pw"}[k] }
	for in, want := range map[string]string{
		"${file:" + secrets + ":password}":   "s3cret:x",
		"${dir:" + dir + ":pgpassword}":      "from-dir",
		"${env:PGPASSWORD}":                  "pw",
		"u=${file:" + secrets + ":user};p=x": "u=cdc;p=x",
	} {
		if got, err := expandProperty(in, getenv); err != nil || got != want {
			t.Errorf("expandProperty(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"${file:" + secrets + ":nope}":         "has no property nope",
		"${file:" + dir + "/missing:password}": "no such file",
		"${dir:" + dir + ":missing}":           "no such file",
		"${file:" + secrets + "}":              "want file:PATH:KEY",
		"${env:NOPE}":                          "the environment variable NOPE is not set",
	} {
		if _, err := expandProperty(in, getenv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("expandProperty(%q) = %v; want an error saying %q", in, err, want)
		}
	}
}

// TestSplitRegexList pins Debezium's RegExSplitter: commas split, an
// escaped comma does not, items are trimmed and empty ones dropped.
func TestSplitRegexList(t *testing.T) {
	got, err := splitRegexList(` inventory\.orders , public\.a\,b,, x{1\,3} `)
	want := []string{`inventory\.orders`, `public\.a,b`, `x{1,3}`}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("splitRegexList = %q, %v; want %q", got, err, want)
	}
	if _, err := splitRegexList(`a\`); err == nil {
		t.Fatal("a trailing backslash was accepted")
	}
}

// TestDebeziumSampleMaps: the sample file unchanged gives the flags its
// properties map to and Debezium's defaults, the password apart from -pg,
// and a warning for each property without effect and for the password
// written in the file; flags and the environment win over it.
func TestDebeziumSampleMaps(t *testing.T) {
	o, err := parse([]string{"-debezium-config", debeziumSampleFile, "-slot", "mine"}, func(k string) string {
		return map[string]string{"KAFKASINK_BATCH_MAX_EVENTS": "7"}[k]
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"-pg", o.pg, "postgres://postgres@localhost:5432/postgres"},
		{"-brokers", o.brokers, "localhost:9092"},
		{"-topic-prefix", o.prefix, "tutorial"},
		{"-schema.include.list", o.filters.schemaIn, "inventory"},
		{"-encoder", o.encoder, "debezium"},
		{"-headers", o.headers, "none"},
		{"-publication", o.publication, "dbz_publication"},
		{"-slot (the flag wins)", o.slot, "mine"},
		{"source name", o.debeziumName, "tutorial"},
		{"password", o.pgPassword, "postgres"},
		{"-schemas.enable", fmt.Sprint(o.debezium.schemasEnable), "true"},
		{"-snapshot", fmt.Sprint(o.snapshot), "true"},
		{"-keyless-tables", fmt.Sprint(o.keylessTables), "true"},
		{"-batch-max-events (the environment wins)", fmt.Sprint(o.batchEvents), "7"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	warnings := strings.Join(o.debeziumWarnings, "\n")
	for _, w := range []string{
		"application.properties:6: debezium.source.offset.storage.file.filename has no effect: kafkasink keeps its position in the checkpoint topic",
		"application.properties:7: debezium.source.offset.flush.interval.ms has no effect",
		"application.properties:11: debezium.source.database.password holds the password in the file: write it as ${PGPASSWORD}",
	} {
		if !strings.Contains(warnings, w) {
			t.Errorf("the warnings do not say %q:\n%s", w, warnings)
		}
	}
	if strings.Contains(o.pg, "postgres:postgres@") {
		t.Errorf("-pg %q holds the password", o.pg)
	}
	_, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	var c pgconn.Config
	if err := pcfg.ConfigureConn(context.Background(), &c); err != nil || c.Password != "postgres" {
		t.Errorf("ConfigureConn gives password %q, %v; want the file's", c.Password, err)
	}
}

// TestDebeziumPasswordFromEnvironment: a password written as ${NAME}
// comes from the environment, without a warning.
func TestDebeziumPasswordFromEnvironment(t *testing.T) {
	path := writeFile(t, "application.properties", debeziumFile("db:5432", "debezium.source.database.password=${DB_PASSWORD}"))
	o, err := parse([]string{"-debezium-config", path}, func(k string) string { return map[string]string{"DB_PASSWORD": "s3cret"}[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.pgPassword != "s3cret" || strings.Contains(strings.Join(o.debeziumWarnings, "\n"), "password") {
		t.Errorf("password %q, warnings %q; want the variable's, and no warning", o.pgPassword, o.debeziumWarnings)
	}
}

// TestKeyColumnRefusedRealPG: a column list that leaves out a key column,
// which only the snapshot or the stream finds, stops the program with
// status 2, naming the flags and the column in the program's terms.
func TestKeyColumnRefusedRealPG(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_keycol")
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" VALUES (1, 'one')"); err != nil {
		t.Fatal(err)
	}
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name, "-topic-prefix", name,
		"-snapshot", "-column.exclude.list", `public\.` + name + `\.ID`, "-log-format", "text"}
	out, status := &kafkasinktest.LogBuffer{}, make(chan int, 1)
	go func() { status <- run(ctx, args, func(k string) string { return env(k, brokers) }, out) }()
	select {
	case code := <-status:
		// The program's own verdict; pgcdc's log record before it is
		// the library's.
		_, verdict, _ := strings.Cut(out.String(), "stopped: configuration error")
		want := "-column.include.list or -column.exclude.list leaves out public." + name + ".id, a key column of its table"
		if code != 2 || !strings.Contains(verdict, want) || !strings.Contains(verdict, "(-key-columns)") || strings.Contains(verdict, "Config.") {
			t.Fatalf("status %d, want 2, and a verdict saying %q and naming -key-columns, no library field:\n%s", code, want, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("the program did not stop:\n%s", out.String())
	}
}

// TestDebeziumPropertiesMap: each mapped property gives its flag the
// value it means.
func TestDebeziumPropertiesMap(t *testing.T) {
	for _, tc := range []struct {
		edit string
		got  func(*options) string
		want string
	}{
		{"debezium.source.database.sslmode=require", func(o *options) string { return o.pg }, "postgres://cdc@db:5432/db?sslmode=require"},
		{"-debezium.source.database.port", func(o *options) string { return o.pg }, "postgres://cdc@db:5432/db"},
		{"debezium.source.database.port=6432", func(o *options) string { return o.pg }, "postgres://cdc@db:6432/db"},
		{"debezium.sink.kafka.producer.compression.type=zstd", func(o *options) string { return o.compression }, "zstd"},
		{`debezium.source.table.include.list=inventory\\.a\\\\\,b , inventory\\.c`, func(o *options) string { return o.filters.tableIn }, `inventory\.a\\,b , inventory\.c`},
		{"debezium.source.column.exclude.list=inventory.c.ssn", func(o *options) string { return o.filters.columnEx }, "inventory.c.ssn"},
		{"debezium.source.snapshot.mode=no_data", func(o *options) string { return fmt.Sprint(o.snapshot) }, "false"},
		{"debezium.source.tombstones.on.delete=false", func(o *options) string { return fmt.Sprint(o.debezium.tombstonesOnDelete) }, "false"},
		{"debezium.source.decimal.handling.mode=string", func(o *options) string { return o.debezium.decimalHandling }, "string"},
		{"debezium.format.schemas.enable=false", func(o *options) string { return fmt.Sprint(o.debezium.schemasEnable) }, "false"},
		{"debezium.source.slot.name=shop", func(o *options) string { return o.slot }, "shop"},
		{"debezium.source.publication.name=shop_pub", func(o *options) string { return o.publication }, "shop_pub"},
		{"debezium.source.skipped.operations=none", func(o *options) string { return o.debezium.skippedOperations }, "none"},
	} {
		path := writeFile(t, "application.properties", debeziumFile("db:5432", tc.edit))
		o, err := parse([]string{"-debezium-config", path}, noEnv, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.edit, err)
			continue
		}
		if got := tc.got(o); got != tc.want {
			t.Errorf("%s: gives %q, want %q", tc.edit, got, tc.want)
		}
	}
}
