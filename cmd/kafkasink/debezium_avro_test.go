package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestDebeziumAvroFlags: -encoder debezium-avro makes the Debezium Avro
// encoder of the registry flags and the Debezium flags, and refuses to
// run without a registry; a subject strategy applies, a namespace is
// refused (Debezium names its records); the Debezium flags with -encoder
// avro are refused.
func TestDebeziumAvroFlags(t *testing.T) {
	base := []string{"-pg", "postgres://localhost/db", "-brokers", "localhost:9092"}
	for _, tt := range []struct {
		args    []string
		problem string // "" when valid
	}{
		{[]string{"-encoder", "debezium-avro", "-schema-registry", "http://registry:8081", "-decimal.handling.mode", "string"}, ""},
		{[]string{"-encoder", "debezium-avro"}, "-encoder avro, json-schema and debezium-avro need -schema-registry"},
		{[]string{"-encoder", "debezium-avro", "-schema-registry", "http://registry:8081", "-provide.transaction.metadata"}, ""},
		{[]string{"-encoder", "avro", "-schema-registry", "http://registry:8081", "-decimal.handling.mode", "string"}, `apply to -encoder debezium and debezium-avro only, not "avro"`},
		{[]string{"-encoder", "debezium-avro", "-schema-registry", "http://registry:8081", "-schema-registry-subjects", "RecordNameStrategy"}, ""},
		{[]string{"-encoder", "debezium-avro", "-schema-registry", "http://registry:8081", "-schema-registry-subjects", "RecordNameStrategy", "-schema-registry-namespace", "db1"}, "leave -schema-registry-namespace empty"},
	} {
		o, err := parse(append(base, tt.args...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		switch {
		case tt.problem == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.problem == "":
			if _, ok := kcfg.Encoder.(*kafkasinkavro.DebeziumEncoder); !ok {
				t.Errorf("%q: Encoder %T, want *kafkasinkavro.DebeziumEncoder", tt.args, kcfg.Encoder)
			}
		case err == nil || !strings.Contains(err.Error(), tt.problem):
			t.Errorf("%q: %v, want a problem %q", tt.args, err, tt.problem)
		}
	}
}

// TestStreamsDebeziumAvro runs the program with -encoder debezium-avro
// against the real PostgreSQL, Kafka and Schema Registry: each change
// arrives as Debezium's envelope in Avro (Confluent wire format, key and
// value), named after -slot (Debezium's topic.prefix) and decoding (with
// twmb/avro, not the encoder's code) with the schema the registry has
// under the record's id into the rows the database held; a delete is
// followed by its tombstone.
func TestStreamsDebeziumAvro(t *testing.T) {
	registry := os.Getenv(envSchemaRegistry)
	if registry == "" {
		t.Skipf("%s not set: start scripts/testenv.sh (up-registry) and eval \"$(scripts/testenv.sh env)\"", envSchemaRegistry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_dbzavro")

	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "1", "-encoder", "debezium-avro", "-schema-registry", registry,
		"-batch-max-wait", "20ms", "-log-format", "text"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" VALUES (1, 'one'), (2, NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "DELETE FROM "+name+" WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	topic := name + ".public." + name
	waitFor(t, 60*time.Second, "4 records in "+topic, status, out, func() bool {
		return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)) >= 4
	})
	reg, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range []string{topic + "-key", topic + "-value"} {
			reg.DeleteSubject(context.Background(), s, sr.SoftDelete)
			reg.DeleteSubject(context.Background(), s, sr.HardDelete)
		}
	})
	var schemaNames []string
	decode := func(b []byte) any {
		t.Helper()
		if b == nil {
			return nil
		}
		if len(b) < 5 || b[0] != 0 {
			t.Fatalf("not the Confluent wire format: %x", b)
		}
		s, err := reg.SchemaByID(ctx, int(binary.BigEndian.Uint32(b[1:5])))
		if err != nil {
			t.Fatal(err)
		}
		parsed := avro.MustParse(s.Schema)
		var v map[string]any
		if _, err := parsed.Decode(b[5:], &v); err != nil {
			t.Fatalf("decoding with the registry's schema: %v", err)
		}
		var named struct{ Name, Namespace string }
		if err := json.Unmarshal([]byte(s.Schema), &named); err != nil {
			t.Fatal(err)
		}
		schemaNames = append(schemaNames, named.Namespace+"."+named.Name)
		return v
	}
	var got []string
	for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
		key := decode(r.Key)
		v, _ := decode(r.Value).(map[string]any)
		if v == nil {
			got = append(got, fmt.Sprintf("%v tombstone", key))
			continue
		}
		src, _ := v["source"].(map[string]any)
		got = append(got, fmt.Sprintf("%v %v before=%v after=%v source=%v.%v.%v", key, v["op"], v["before"], v["after"], src["name"], src["schema"], src["table"]))
	}
	n := name
	want := []string{
		"map[id:1] c before=<nil> after=map[id:1 note:one] source=" + n + ".public." + n,
		"map[id:2] c before=<nil> after=map[id:2 note:<nil>] source=" + n + ".public." + n,
		"map[id:1] d before=map[id:1 note:<nil>] after=<nil> source=" + n + ".public." + n,
		"map[id:1] tombstone",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records (key, op, before, after, source):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range schemaNames {
		if s != n+".public."+n+".Key" && s != n+".public."+n+".Envelope" {
			t.Errorf("schema %s, want %s.public.%s.Key or .Envelope (Debezium's names, -slot its topic.prefix)", s, n, n)
		}
	}
	stop()
	if code := <-status; code != 0 {
		t.Fatalf("exit status %d after cancellation, want 0:\n%s", code, out.String())
	}
}
