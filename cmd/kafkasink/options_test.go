package main

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// TestFlagsOverrideEnvironment pins the precedence: a flag on the command
// line wins over its environment variable, which wins over the default;
// the SASL password is never a flag.
func TestFlagsOverrideEnvironment(t *testing.T) {
	environ := map[string]string{
		"KAFKASINK_BROKERS":          "env:9092",
		"KAFKASINK_MODE":             "idempotent",
		"KAFKASINK_BATCH_MAX_EVENTS": "77",
		"KAFKASINK_SNAPSHOT":         "true",
		"KAFKASINK_SASL_MECHANISM":   "scram-sha-512",
		"KAFKASINK_SASL_USER":        "cdc",
		"KAFKASINK_SASL_PASSWORD":    "hunter2",
		"KAFKASINK_TLS_CA":           writeFile(t, "ca.pem", string(newTestCA(t).certPEM)),
	}
	var stderr bytes.Buffer
	o, err := parse([]string{"-brokers", "flag:9092", "-pg", "postgres://h/db", "-encoder", "debezium"}, func(k string) string { return environ[k] }, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := kcfg.Brokers; len(got) != 1 || got[0] != "flag:9092" {
		t.Errorf("Brokers %v, want the flag's [flag:9092]", got)
	}
	if kcfg.Mode != kafkasink.Idempotent || pcfg.BatchMaxEvents != 77 || !pcfg.Snapshot {
		t.Errorf("environment not applied: mode %v, batch %d, snapshot %t", kcfg.Mode, pcfg.BatchMaxEvents, pcfg.Snapshot)
	}
	if _, ok := kcfg.Encoder.(debezium.Encoder); !ok {
		t.Errorf("Encoder %T, want DebeziumEncoder", kcfg.Encoder)
	}
	if kcfg.SASL == nil || kcfg.SASL.Mechanism != kafkasink.SASLScramSHA512 || kcfg.SASL.Username != "cdc" || kcfg.SASL.Password != "hunter2" {
		t.Errorf("SASL %+v", kcfg.SASL)
	}
	if kcfg.TLS == nil || kcfg.TLS.CAFile != environ["KAFKASINK_TLS_CA"] {
		t.Errorf("TLS %+v", kcfg.TLS)
	}
	if kcfg.SinkID != "kafkasink" || pcfg.Slot != "kafkasink" {
		t.Errorf("SinkID %q, Slot %q: want both the default slot name", kcfg.SinkID, pcfg.Slot)
	}

	if o.slotGap != pgcdc.SlotGapRefuse || pcfg.SlotGap != pgcdc.SlotGapRefuse {
		t.Errorf("default slot gap policy %v, want refuse", pcfg.SlotGap)
	}
	for arg, want := range map[string]pgcdc.SlotGap{"resnapshot": pgcdc.SlotGapResnapshot, "accept": pgcdc.SlotGapAccept} {
		o, err := parse([]string{"-slot-gap", arg, "-retained-wal-warn", "4096"}, func(string) string { return "" }, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if _, pcfg, _ := o.configs(nil); pcfg.SlotGap != want || pcfg.RetainedWALWarn != 4096 {
			t.Errorf("-slot-gap %s -retained-wal-warn 4096: SlotGap %v, RetainedWALWarn %d", arg, pcfg.SlotGap, pcfg.RetainedWALWarn)
		}
	}
	if _, err := parse([]string{"-slot-gap", "ignore"}, func(string) string { return "" }, &stderr); err == nil || !strings.Contains(err.Error(), "-slot-gap") {
		t.Errorf("-slot-gap ignore: %v, want an error naming the flag", err)
	}

	if _, err := parse([]string{"-sasl-password", "x"}, func(string) string { return "" }, &stderr); err == nil {
		t.Error("-sasl-password was accepted: the password must not be a flag")
	}
	if _, err := parse(nil, func(k string) string { return map[string]string{"KAFKASINK_BATCH_MAX_EVENTS": "many"}[k] }, &stderr); err == nil || !strings.Contains(err.Error(), "KAFKASINK_BATCH_MAX_EVENTS") {
		t.Errorf("a bad environment value: %v, want an error naming it", err)
	}
	o, _ = parse([]string{"-encoder", "xml", "-key-format", "yaml", "-key-columns", "public.t"}, func(string) string { return "" }, &stderr)
	if _, _, err := o.configs(nil); err == nil || !strings.Contains(err.Error(), "-encoder") || !strings.Contains(err.Error(), "-key-format") ||
		!strings.Contains(err.Error(), "-pg") || !strings.Contains(err.Error(), "-key-columns") {
		t.Errorf("configs: %v, want every problem at once", err)
	}
}

func TestSplitNames(t *testing.T) {
	t.Parallel()
	in := ` a.b , public."x,y", "s"".q"."t,u"=topic.one,,c `
	want := []string{"a.b", `public."x,y"`, `"s"".q"."t,u"=topic.one`, "c"}
	if got := splitNames(in); !slices.Equal(got, want) {
		t.Errorf("splitNames(%q) = %q, want %q", in, got, want)
	}
}

func TestKeyColumnsFlag(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parse([]string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-key-columns", "shop.orders=tenant, id; items=sku"}, func(string) string { return "" }, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	_, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.KeyColumns == nil {
		t.Fatal("-key-columns did not set pgcdc.Config.KeyColumns")
	}
	for _, tc := range []struct {
		schema, table string
		want          []string
	}{{"shop", "orders", []string{"tenant", "id"}}, {"public", "items", []string{"sku"}}, {"public", "other", nil}} {
		if got, _ := pcfg.KeyColumns.Columns(tc.schema, tc.table); !slices.Equal(got, tc.want) {
			t.Errorf("KeyColumns(%s, %s) = %q, want %q", tc.schema, tc.table, got, tc.want)
		}
	}
	for _, bad := range []string{"orders", "orders=", "=id", "a.b=x;a.b=y"} {
		if _, err := parseKeyColumns(bad); err == nil || !strings.Contains(err.Error(), "-key-columns") {
			t.Errorf("parseKeyColumns(%q) = %v, want an error naming -key-columns", bad, err)
		}
	}
}

func TestKeylessTablesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{{nil, "", false}, {[]string{"-keyless-tables"}, "", true}, {nil, "true", true}, {[]string{"-keyless-tables=false"}, "true", false}} {
		var stderr bytes.Buffer
		getenv := func(name string) string {
			if name == "KAFKASINK_KEYLESS_TABLES" {
				return tc.env
			}
			return ""
		}
		o, err := parse(append([]string{"-pg", "postgres://h/db", "-brokers", "b:9092"}, tc.args...), getenv, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		_, pcfg, err := o.configs(nil)
		if err != nil {
			t.Fatal(err)
		}
		if pcfg.KeylessTables != tc.want {
			t.Errorf("%q with $KAFKASINK_KEYLESS_TABLES=%q: pgcdc.Config.KeylessTables = %t, want %t", tc.args, tc.env, pcfg.KeylessTables, tc.want)
		}
	}
}

// TestDebeziumFlags checks that each debezium.Encoder option has its flag,
// named after Debezium's property, with Debezium's default; that its
// environment variable sets it too; that a mode Debezium does not have is
// refused naming the flag; and that the flags are refused with another
// encoder.
func TestDebeziumFlags(t *testing.T) {
	base := []string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-slot", "shop"}
	encoder := func(t *testing.T, args []string, env map[string]string) (debezium.Encoder, error) {
		t.Helper()
		var stderr bytes.Buffer
		o, err := parse(append(slices.Clone(base), args...), func(k string) string { return env[k] }, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		enc, _ := kcfg.Encoder.(debezium.Encoder)
		return enc, err
	}

	enc, err := encoder(t, []string{"-encoder", "debezium"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (debezium.Encoder{Name: "shop"}); !reflect.DeepEqual(enc, want) {
		t.Errorf("defaults: %+v, want Debezium's, %+v", enc, want)
	}

	enc, err = encoder(t, []string{"-encoder", "debezium",
		"-decimal.handling.mode", "string", "-time.precision.mode", "isostring", "-interval.handling.mode", "string",
		"-binary.handling.mode", "hex", "-tombstones.on.delete=false", "-skipped.operations", "none",
		"-unavailable.value.placeholder", "??", "-extended.headers.enabled=false",
		"-debezium-lsn-as-string", "-debezium-null-nested-arrays", "-debezium-match-losses", "-debezium-run-id", "run-1",
		"-provide.transaction.metadata", "-transaction.topic", "shop.txns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := debezium.Encoder{Name: "shop",
		DecimalHandling: debezium.DecimalString, TimePrecision: debezium.TimeIsostring, IntervalHandling: debezium.IntervalString,
		BinaryHandling: debezium.BinaryHex, DisableTombstones: true, SkippedOperations: "none",
		UnavailableValuePlaceholder: "??", DisableExtendedHeaders: true,
		LSNAsString: true, NullNestedArrays: true, MatchDebeziumLosses: true, RunID: "run-1",
		ProvideTransactionMetadata: true, TransactionTopic: "shop.txns"}
	if !reflect.DeepEqual(enc, want) {
		t.Errorf("every flag set:\n got %+v\nwant %+v", enc, want)
	}

	enc, err = encoder(t, []string{"-encoder", "debezium"}, map[string]string{"KAFKASINK_DECIMAL_HANDLING_MODE": "double", "KAFKASINK_TOMBSTONES_ON_DELETE": "false"})
	if err != nil || enc.DecimalHandling != debezium.DecimalDouble || !enc.DisableTombstones {
		t.Errorf("from the environment: %+v, %v; want decimal double, no tombstones", enc, err)
	}

	_, err = encoder(t, []string{"-encoder", "debezium", "-decimal.handling.mode", "exact", "-binary.handling.mode", "b64"}, nil)
	if err == nil || !strings.Contains(err.Error(), "-decimal.handling.mode") || !strings.Contains(err.Error(), "-binary.handling.mode") {
		t.Errorf("unknown modes: %v, want an error naming both flags", err)
	}
	_, err = encoder(t, []string{"-encoder", "json", "-time.precision.mode", "connect"}, nil)
	if err == nil || !strings.Contains(err.Error(), "-time.precision.mode") || !strings.Contains(err.Error(), "-encoder debezium") {
		t.Errorf("a Debezium flag with -encoder json: %v, want an error naming the flag and -encoder debezium", err)
	}
}

// TestHeadersAndCompressionFlags: -headers sets Config.Headers and
// -compression the client's batch compression, snappy by default (what
// franz-go, and so the library, uses); a value they do not know is
// refused, naming the flag.
func TestHeadersAndCompressionFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		headers kafkasink.HeaderSet
		codec   kgo.CompressionCodec
	}{
		{nil, kafkasink.HeadersAll, kgo.SnappyCompression()},
		{[]string{"-headers", "minimal", "-compression", "zstd"}, kafkasink.HeadersMinimal, kgo.ZstdCompression()},
		{[]string{"-headers", "none", "-compression", "lz4"}, kafkasink.HeadersNone, kgo.Lz4Compression()},
		{[]string{"-headers", "all", "-compression", "none"}, kafkasink.HeadersAll, kgo.NoCompression()},
	} {
		o, err := parse(append([]string{"-pg", "postgres://x", "-brokers", "k:9092"}, c.args...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		cl, err := kgo.NewClient(kcfg.ClientOptions...)
		if err != nil {
			t.Fatal(err)
		}
		codecs := cl.OptValues(kgo.ProducerBatchCompression)
		cl.Close()
		if kcfg.Headers != c.headers || len(codecs) != 1 || !reflect.DeepEqual(codecs[0], []kgo.CompressionCodec{c.codec}) {
			t.Errorf("%q: Headers %s, compression %v; want %s, %v", c.args, kcfg.Headers, codecs, c.headers, c.codec)
		}
	}
	o, err := parse([]string{"-headers", "some", "-compression", "brotli"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.configs(nil); err == nil || !strings.Contains(err.Error(), `-headers "some"`) || !strings.Contains(err.Error(), `-compression "brotli"`) {
		t.Errorf("-headers some -compression brotli: %v, want both refused by name", err)
	}
}

// TestAnnotationsFlags: -annotations, from the command line, the
// environment or the configuration file (a YAML sequence), sets
// Config.Annotations, -annotations-in Config.AnnotationsIn (value by
// default) and -debezium-annotations debezium.Encoder.WriteAnnotations; a
// pair without '=', a key given twice, an unknown place and
// -debezium-annotations with another encoder are refused naming the flag,
// and value annotations with a Schema Registry encoder are refused by the
// sink's check (kafkasink.Config.Validate) with the flag that fixes it.
func TestAnnotationsFlags(t *testing.T) {
	base := []string{"-pg", "postgres://h/db", "-brokers", "b:9092"}
	configs := func(t *testing.T, args []string, env map[string]string) (kafkasink.Config, error) {
		t.Helper()
		o, err := parse(append(slices.Clone(base), args...), func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		return kcfg, err
	}
	prodEU := map[string]string{"env": "prod", "region": "eu-west-1"}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want map[string]string
		in   kafkasink.AnnotationPlace
	}{
		{"none", nil, nil, nil, kafkasink.AnnotateValue},
		{"flag", []string{"-annotations", " env=prod , region = eu-west-1 "}, nil, prodEU, kafkasink.AnnotateValue},
		{"environment", nil, map[string]string{"KAFKASINK_ANNOTATIONS": "env=prod,region=eu-west-1", "KAFKASINK_ANNOTATIONS_IN": "both"}, prodEU, kafkasink.AnnotateBoth},
		{"file", []string{"-config", writeFile(t, "annotations.yaml", "annotations:\n  - env=prod\n  - region=eu-west-1\nannotations_in: headers\n")}, nil, prodEU, kafkasink.AnnotateHeaders},
		{"empty value", []string{"-annotations", "env="}, nil, map[string]string{"env": ""}, kafkasink.AnnotateValue},
	} {
		kcfg, err := configs(t, c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(kcfg.Annotations, c.want) || kcfg.AnnotationsIn != c.in {
			t.Errorf("%s: Annotations %q in %s, want %q in %s", c.name, kcfg.Annotations, kcfg.AnnotationsIn, c.want, c.in)
		}
	}

	kcfg, err := configs(t, []string{"-encoder", "debezium", "-debezium-annotations", "-annotations", "env=prod"}, nil)
	if enc, _ := kcfg.Encoder.(debezium.Encoder); err != nil || !enc.WriteAnnotations {
		t.Errorf("-debezium-annotations: %+v, %v; want WriteAnnotations", kcfg.Encoder, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-annotations", "env=prod,eu-west-1"}, `-annotations "eu-west-1": want key=value`},
		{[]string{"-annotations", "env=prod,env=test"}, `-annotations names "env" twice`},
		{[]string{"-annotations", "env=prod", "-annotations-in", "key"}, `-annotations-in "key": want value, headers or both`},
		{[]string{"-debezium-annotations"}, "-debezium-annotations"},
	} {
		if _, err := configs(t, c.args, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %s", c.args, err, c.want)
		}
	}

	_, err = configs(t, []string{"-encoder", "avro", "-schema-registry", "http://127.0.0.1:9", "-annotations", "env=prod"}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not write annotations") || !strings.Contains(err.Error(), "-annotations-in headers") {
		t.Errorf("-encoder avro with annotations in the value: %v, want the sink's check to refuse it, naming -annotations-in headers", err)
	}
}
