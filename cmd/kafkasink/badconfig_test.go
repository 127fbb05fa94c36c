package main

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// trap is a loopback listener for the program's PostgreSQL and Kafka: a
// connection to it fails the test, and ends the run it belongs to (so
// that a program waiting for a lease or a broker it must not have dialed
// returns).
type trap struct {
	addr   string
	dialed atomic.Int32
	cancel atomic.Pointer[context.CancelFunc]
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tr := &trap{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			tr.dialed.Add(1)
			if cancel := tr.cancel.Load(); cancel != nil {
				(*cancel)()
			}
		}
	}()
	return tr
}

// TestBadConfigurationsExitAtOnce: each bad configuration, from flags,
// the environment or the configuration file, and whichever of the
// program's or the library's checks finds it, ends the program with
// status 2 before it connects anywhere (the brokers and PostgreSQL are a
// trap), -ha on as by default, with every problem named by its flag,
// key or variable and its fix.
func TestBadConfigurationsExitAtOnce(t *testing.T) {
	tr := newTrap(t)
	base := []string{"-pg", "postgres://cdc@" + tr.addr + "/db", "-brokers", tr.addr}
	notPEM := writeFile(t, "not.pem", "no certificate here\n")
	password := writeFile(t, "password", "secret\n")
	file := func(content string) []string { return []string{"-config", writeFile(t, "kafkasink.yaml", content)} }
	// dbz is -debezium-config with a Debezium Server file whose
	// PostgreSQL and Kafka are the trap, changed by edits ("key=value"
	// replaces or adds the property, "-key" removes it).
	dbz := func(edits ...string) []string {
		return []string{"-debezium-config", writeFile(t, "application.properties", debeziumFile(tr.addr, edits...))}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		setenv  map[string]string // in the process's environment, for the unknown variables
		want    []string
		noFlags bool // base left out
	}{
		// The command line: flag values
		{name: "not an integer", args: []string{"-batch-max-events", "x"}, want: []string{`-batch-max-events "x": want an integer [flag -batch-max-events, YAML batch_max_events, env KAFKASINK_BATCH_MAX_EVENTS]`}},
		{name: "not a duration", args: []string{"-batch-max-wait", "20"}, want: []string{`-batch-max-wait "20": want a duration such as 250ms`}},
		{name: "not a boolean", args: []string{"-snapshot=maybe"}, want: []string{`-snapshot "maybe": want true or false`}},
		{name: "not a slot gap policy", args: []string{"-slot-gap", "ignore"}, want: []string{`-slot-gap "ignore": want refuse, resnapshot or accept`}},
		{name: "unknown flag", args: []string{"-topic-prefx", "shop"}, want: []string{"unknown flag -topic-prefx (did you mean -topic-prefix?)"}},
		{name: "positional argument", args: []string{"shop"}, want: []string{`unexpected arguments ["shop"]: every setting is a flag`}},
		{name: "unknown mode", args: []string{"-mode", "fast"}, want: []string{`-mode "fast": want exactly-once, idempotent or plain [flag -mode, YAML mode, env KAFKASINK_MODE]`}},
		{name: "unknown encoder", args: []string{"-encoder", "xml"}, want: []string{`-encoder "xml": want json, upsert, debezium, avro, json-schema or debezium-avro`}},
		{name: "unknown key format", args: []string{"-key-format", "yaml"}, want: []string{`-key-format "yaml": want text or json`}},
		{name: "unknown headers", args: []string{"-headers", "some"}, want: []string{`-headers "some": want all, minimal or none`}},
		{name: "unknown compression", args: []string{"-compression", "brotli"}, want: []string{`-compression "brotli": want none, snappy, lz4, zstd or gzip`}},
		{name: "unknown log level", args: []string{"-log-level", "loud"}, want: []string{`-log-level "loud": want debug, info, warn or error [flag -log-level, YAML log_level, env KAFKASINK_LOG_LEVEL]`}},
		{name: "unknown annotations place", args: []string{"-annotations", "env=prod", "-annotations-in", "key"}, want: []string{`-annotations-in "key": want value, headers or both`}},
		{name: "bad annotation", args: []string{"-annotations", "env"}, want: []string{`-annotations "env": want key=value pairs`}},
		{name: "bad key columns", args: []string{"-key-columns", "public.t"}, want: []string{`-key-columns "public.t": want schema.table=col1,col2`}},
		// The sink's checks (kafkasink.Config.Validate), in flags
		{name: "topic prefix", args: []string{"-topic-prefix", "bad/prefix"}, want: []string{`-topic-prefix: topic name "bad/prefix" has characters outside [a-zA-Z0-9._-] [flag -topic-prefix, YAML topic_prefix, env KAFKASINK_TOPIC_PREFIX]`}},
		{name: "prefix and template", args: []string{"-topic-prefix", "shop", "-topic-template", "{schema}.{table}"}, want: []string{"-topic-template and -topic-prefix are both set: use one"}},
		{name: "checkpoint topic", args: []string{"-checkpoint-topic", "a/b"}, want: []string{`-checkpoint-topic: topic name "a/b"`}},
		{name: "dead letters in the checkpoint topic", args: []string{"-dead-letter-topic", "cp", "-checkpoint-topic", "cp"}, want: []string{`-dead-letter-topic and -checkpoint-topic are both "cp": use separate topics`}},
		{name: "partitions", args: []string{"-partitions", "-5"}, want: []string{"-partitions -5: want a positive count or -1 for the broker's default"}},
		{name: "transaction timeout", args: []string{"-transaction-timeout", "500ms"}, want: []string{"-transaction-timeout 500ms: want between 1s and the broker's transaction.max.timeout.ms"}},
		{name: "no brokers", args: []string{"-brokers", ""}, want: []string{"-brokers is empty: give at least one host:port [flag -brokers, YAML brokers, env KAFKASINK_BROKERS]"}},
		{name: "SCRAM without a password", args: []string{"-sasl-mechanism", "SCRAM-SHA-256", "-sasl-user", "cdc"}, want: []string{"SASL SCRAM-SHA-256 needs -sasl-user and a password (-sasl-password-file or $KAFKASINK_SASL_PASSWORD)"}},
		{name: "PLAIN without TLS", args: []string{"-sasl-mechanism", "plain", "-sasl-user", "cdc", "-sasl-password-file", password}, want: []string{"SASL PLAIN without TLS sends the password in clear text: set -tls-ca (or another -tls-* flag)"}},
		{name: "unknown SASL mechanism", args: []string{"-sasl-mechanism", "gssapi"}, want: []string{`-sasl-mechanism "gssapi": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 [flag -sasl-mechanism`}},
		{name: "SASL user without a mechanism", args: []string{"-sasl-user", "cdc"}, want: []string{"-sasl-mechanism is not set, but -sasl-user, -sasl-password-file or $KAFKASINK_SASL_PASSWORD is: set -sasl-mechanism"}},
		{name: "certificate without key", args: []string{"-tls-cert", notPEM}, want: []string{"-tls-cert and -tls-key must be given together"}},
		{name: "missing CA file", args: []string{"-tls-ca", notPEM + ".missing"}, want: []string{"-tls-ca: open " + notPEM + ".missing: no such file or directory [flag -tls-ca, YAML tls_ca, env KAFKASINK_TLS_CA]"}},
		{name: "CA file without a certificate", args: []string{"-tls-ca", notPEM}, want: []string{"-tls-ca (" + notPEM + "): no PEM certificate found"}},
		{name: "Avro without a registry", args: []string{"-encoder", "avro"}, want: []string{"-encoder avro, json-schema and debezium-avro need -schema-registry"}},
		{name: "Debezium mode", args: []string{"-encoder", "debezium", "-decimal.handling.mode", "exact"}, want: []string{`-decimal.handling.mode "exact": want precise, double or string [flag -decimal.handling.mode, YAML decimal_handling_mode, env KAFKASINK_DECIMAL_HANDLING_MODE]`}},
		{name: "Debezium flag without Debezium", args: []string{"-time.precision.mode", "connect"}, want: []string{"apply to -encoder debezium and debezium-avro only"}},
		// pgcdc's and the lease's checks, in flags
		{name: "slot name", args: []string{"-slot", "My-Slot"}, want: []string{`-slot "My-Slot" is not a valid replication slot name: use lower-case letters, digits and underscores`, "[flag -slot, YAML slot, env KAFKASINK_SLOT]"}},
		{name: "no publication", args: []string{"-publication", ""}, want: []string{"-publication is required"}},
		{name: "table name", args: []string{"-tables", "a.b.c"}, want: []string{`-tables: table name "a.b.c" has 3 dot-separated parts, want schema.table: quote the part`}},
		{name: "lease timeout", args: []string{"-lease-timeout", "100ms"}, want: []string{"-lease-timeout 100ms is below one second", "[flag -lease-timeout, YAML lease_timeout, env KAFKASINK_LEASE_TIMEOUT]"}},
		{name: "no connection string", args: []string{"-pg", "", "-brokers", tr.addr}, noFlags: true, want: []string{"-pg is required: a postgres:// URL or keyword/value string [flag -pg, YAML pg, env KAFKASINK_PG]"}},
		{name: "missing password file", args: []string{"-pg-password-file", password + ".missing"}, want: []string{"-pg-password-file: open " + password + ".missing"}},
		{name: "password twice", args: []string{"-pg", "postgres://cdc:pw@" + tr.addr + "/db", "-brokers", tr.addr, "-pg-password-file", password}, noFlags: true, want: []string{"-pg holds a password and -pg-password-file is set: give the password one way"}},
		// The HTTP listener's flags
		{name: "remote listener", args: []string{"-http-addr", "0.0.0.0:9187"}, want: []string{`-http-addr "0.0.0.0:9187" is not a loopback address`, "set -http-allow-remote"}},
		{name: "readiness bound without a listener", args: []string{"-ready-max-lag", "1m"}, want: []string{"set -http-addr"}},
		// The environment
		{name: "environment: not an integer", env: map[string]string{"KAFKASINK_BATCH_MAX_EVENTS": "many"}, want: []string{`$KAFKASINK_BATCH_MAX_EVENTS: "many" is not an integer [flag -batch-max-events, YAML batch_max_events, env KAFKASINK_BATCH_MAX_EVENTS]`}},
		{name: "environment: unknown mode", env: map[string]string{"KAFKASINK_MODE": "fast"}, want: []string{`-mode "fast": want exactly-once, idempotent or plain [flag -mode, YAML mode, env KAFKASINK_MODE]`}},
		{name: "environment: two passwords", args: []string{"-sasl-mechanism", "scram-sha-256", "-sasl-user", "cdc", "-sasl-password-file", password}, env: map[string]string{"KAFKASINK_SASL_PASSWORD": "x"},
			want: []string{"$KAFKASINK_SASL_PASSWORD and -sasl-password-file are both set: give the password one way"}},
		{name: "environment: misspelt variable", setenv: map[string]string{"KAFKASINK_BROKER": tr.addr}, want: []string{"$KAFKASINK_BROKER is not a setting of kafkasink (did you mean $KAFKASINK_BROKERS?): rename or unset it"}},
		// The configuration file
		{name: "file: unknown key", args: file("slott: shop\n"), want: []string{`kafkasink.yaml:1: unknown key "slott"`}},
		{name: "file: a secret", args: file("sasl_password: hunter2\n"), want: []string{"kafkasink.yaml:1: sasl_password: a configuration file must not hold secrets; use sasl_password_file (-sasl-password-file) or $KAFKASINK_SASL_PASSWORD"}},
		{name: "file: not an integer", args: file("batch_max_events: many\n"), want: []string{`kafkasink.yaml:1: batch_max_events: "many" is not an integer [flag -batch-max-events, YAML batch_max_events, env KAFKASINK_BATCH_MAX_EVENTS]`}},
		{name: "file: topic prefix", args: file("topic_prefix: bad/prefix\n"), want: []string{`-topic-prefix: topic name "bad/prefix" has characters outside [a-zA-Z0-9._-] [flag -topic-prefix, YAML topic_prefix, env KAFKASINK_TOPIC_PREFIX]`}},
		// A Debezium Server file (-debezium-config)
		{name: "debezium: plugin", noFlags: true, args: dbz("debezium.source.plugin.name=decoderbufs"), want: []string{`application.properties:`, `: debezium.source.plugin.name: "decoderbufs" is not supported: want pgoutput`}},
		{name: "debezium: snapshot mode refused", noFlags: true, args: dbz("debezium.source.snapshot.mode=always"), want: []string{`debezium.source.snapshot.mode: "always" is not supported: kafkasink supports initial (snapshot, then stream) and no_data`}},
		{name: "debezium: snapshot mode unknown", noFlags: true, args: dbz("debezium.source.snapshot.mode=sometimes"), want: []string{`debezium.source.snapshot.mode: "sometimes" is not a Debezium snapshot.mode: want initial or no_data`}},
		{name: "debezium: connector", noFlags: true, args: dbz("debezium.source.connector.class=io.debezium.connector.mysql.MySqlConnector"), want: []string{`debezium.source.connector.class: "io.debezium.connector.mysql.MySqlConnector" is not supported: want io.debezium.connector.postgresql.PostgresConnector`}},
		{name: "debezium: sink type", noFlags: true, args: dbz("debezium.sink.type=kinesis"), want: []string{`debezium.sink.type: "kinesis" is not supported: want kafka`}},
		{name: "debezium: other sink", noFlags: true, args: dbz("debezium.sink.kinesis.region=eu-central-1"), want: []string{"debezium.sink.kinesis.region: not supported: kafkasink writes to Kafka only"}},
		{name: "debezium: unmapped source property", noFlags: true, args: dbz("debezium.source.max.batch.size=10"), want: []string{"debezium.source.max.batch.size: kafkasink does not map this property: remove it"}},
		{name: "debezium: producer acks", noFlags: true, args: dbz("debezium.sink.kafka.producer.acks=1"), want: []string{"debezium.sink.kafka.producer.acks: not supported: kafkasink writes with acks=all"}},
		{name: "debezium: producer passthrough", noFlags: true, args: dbz("debezium.sink.kafka.producer.linger.ms=5"), want: []string{"debezium.sink.kafka.producer.linger.ms: not supported: kafkasink configures its own producer"}},
		{name: "debezium: serializer", noFlags: true, args: dbz("debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.ByteArraySerializer"), want: []string{`value.serializer: "org.apache.kafka.common.serialization.ByteArraySerializer" is not supported: want org.apache.kafka.common.serialization.StringSerializer`}},
		{name: "debezium: format", noFlags: true, args: dbz("debezium.format.value=avro"), want: []string{`debezium.format.value: "avro" is not supported: want json`}},
		{name: "debezium: schemas disagree", noFlags: true, args: dbz("debezium.format.key.schemas.enable=true", "debezium.format.value.schemas.enable=false"), want: []string{`schemas.enable: "false" disagrees with debezium.format.key.schemas.enable="true"`}},
		{name: "debezium: transforms", noFlags: true, args: dbz("debezium.transforms=unwrap"), want: []string{"debezium.transforms: not supported: kafkasink applies no single message transforms"}},
		{name: "debezium: no topic prefix", noFlags: true, args: dbz("-debezium.source.topic.prefix"), want: []string{"debezium.source.topic.prefix is not set, and Debezium requires it"}},
		{name: "debezium: no database", noFlags: true, args: dbz("-debezium.source.database.dbname"), want: []string{"debezium.source.database.dbname is not set, and Debezium requires it"}},
		{name: "debezium: unknown config provider", noFlags: true, args: dbz("debezium.source.config.providers=vault"), want: []string{`debezium.source.config.providers: the config provider "vault" is not supported: kafkasink resolves ${file:PATH:KEY}, ${dir:DIR:NAME} and ${env:NAME} itself`}},
		{name: "debezium: secret file missing", noFlags: true, args: dbz("debezium.source.database.password=${file:/nonexistent/db.properties:password}"), want: []string{"debezium.source.database.password: ${file:/nonexistent/db.properties:password}: open /nonexistent/db.properties: no such file or directory"}},
		{name: "debezium: unset variable", noFlags: true, args: dbz("debezium.source.database.password=${DB_SECRET_X}"), want: []string{"debezium.source.database.password: ${DB_SECRET_X}: the environment variable DB_SECRET_X", "is not set: set it, or give a default"}},
		{name: "debezium: regular expression", noFlags: true, args: dbz(`debezium.source.table.include.list=inventory\\.(?=x)`), want: []string{`-table.include.list item "inventory\\.(?=x)" is not a regular expression Go accepts`}},
		{name: "debezium: include and exclude", noFlags: true, args: dbz("debezium.source.table.include.list=a\\.b", "debezium.source.table.exclude.list=a\\.c"), want: []string{"-table.include.list and -table.exclude.list are both set"}},
		{name: "debezium: old server name", noFlags: true, args: dbz("debezium.source.database.server.name=tutorial"), want: []string{"debezium.source.database.server.name: not supported: Debezium 2.0 replaced it with topic.prefix"}},
		{name: "debezium: value mode", noFlags: true, args: dbz("debezium.source.decimal.handling.mode=exact"), want: []string{`debezium.source.decimal.handling.mode: "exact" is not supported: want precise or double or string`}},
		{name: "debezium: publication filtered", noFlags: true, args: dbz("debezium.source.publication.autocreate.mode=filtered"), want: []string{`debezium.source.publication.autocreate.mode: "filtered" is not supported: give the tables of the publication with -tables`}},
		{name: "debezium: hstore map", noFlags: true, args: dbz("debezium.source.hstore.handling.mode=map"), want: []string{`debezium.source.hstore.handling.mode: "map" is not supported: want json`}},
		{name: "debezium: set twice", noFlags: true, args: dbz("debezium.source.slot.name=a", "debezium.source.slot.name=b"), want: []string{"debezium.source.slot.name is set twice (first at line"}},
		{name: "debezium: bad escape", noFlags: true, args: dbz(`debezium.source.slot.name=\u12`), want: []string{`malformed \uXXXX escape`}},
		{name: "debezium: slot name", noFlags: true, args: dbz("debezium.source.slot.name=My-Slot"), want: []string{`-slot "My-Slot" is not a valid replication slot name`, "application.properties:13: debezium.source.slot.name)"}},
		{name: "debezium: two passwords", noFlags: true, args: append(dbz(), "-pg-password-file", password), want: []string{"-pg-password-file is set and -debezium-config has debezium.source.database.password: give the password one way"}},
		{name: "debezium: no file", noFlags: true, args: []string{"-debezium-config", password + ".missing"}, want: []string{"-debezium-config: open " + password + ".missing"}},
		{name: "every problem at once", args: []string{"-mode", "fast", "-slot", "My-Slot", "-topic-prefix", "bad/prefix", "-batch-max-events", "x"},
			want: []string{"4 configuration problems", `-mode "fast"`, `-slot "My-Slot"`, `-topic-prefix: topic name "bad/prefix"`, `-batch-max-events "x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.setenv {
				t.Setenv(k, v)
			}
			// The process's environment counts only where the case set
			// it: the test's own (KAFKASINK_TEST_*, or another test's
			// knobs) must not change what it finds.
			getenv := func(k string) string {
				if _, ok := tc.setenv[k]; ok {
					return os.Getenv(k)
				}
				return tc.env[k]
			}
			args := tc.args
			if !tc.noFlags {
				args = append(slices.Clone(base), tc.args...)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr.cancel.Store(&cancel)
			var out kafkasinktest.LogBuffer
			code := run(ctx, args, getenv, &out)
			if n := tr.dialed.Swap(0); n > 0 {
				t.Errorf("the program connected %d times before refusing its configuration", n)
			}
			if code != 2 {
				t.Errorf("status %d, want 2", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the output does not say %s:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "hunter2") {
				t.Errorf("the output shows the secret:\n%s", out.String())
			}
		})
	}
}

// TestPasswordInPGIsWarnedAbout: a password inside -pg (the flag or its
// variable; the file refuses it) is accepted with a warning naming the
// ways to give it instead, without showing it; none without one.
func TestPasswordInPGIsWarnedAbout(t *testing.T) {
	tr := newTrap(t)
	for _, tc := range []struct {
		pg   string
		warn bool
	}{
		{"postgres://cdc:hunter2@" + tr.addr + "/db", true},
		{"host=127.0.0.1 port=" + tr.addr[strings.LastIndexByte(tr.addr, ':')+1:] + " user=cdc password=hunter2", true},
		{"postgres://cdc@" + tr.addr + "/db", false},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		tr.cancel.Store(&cancel)
		var out kafkasinktest.LogBuffer
		run(ctx, []string{"-pg", tc.pg, "-brokers", tr.addr, "-log-format", "json"}, noEnv, &out)
		cancel()
		tr.dialed.Store(0)
		warned := strings.Contains(out.String(), "-pg holds a password") && strings.Contains(out.String(), "-pg-password-file") && strings.Contains(out.String(), "$PGPASSWORD")
		if warned != tc.warn || strings.Contains(out.String(), "hunter2") {
			t.Errorf("-pg %s: warned %t, want %t, and never the password:\n%s", strings.ReplaceAll(tc.pg, "hunter2", "***"), warned, tc.warn, out.String())
		}
	}
}
