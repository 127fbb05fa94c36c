package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestAvroFlags: -encoder avro makes the Avro encoder of
// -schema-registry, and refuses to run without one; the registry's flags
// with another encoder are refused too, and so are half of the basic
// authentication or of a client certificate, basic and bearer
// authentication together, TLS flags with an http:// URL, files that do
// not hold what they should, an unknown subject strategy and a namespace
// that is no Avro namespace or does nothing under TopicNameStrategy.
// -encoder json-schema takes the subject strategy and namespace too.
func TestAvroFlags(t *testing.T) {
	base := []string{"-pg", "postgres://localhost/db", "-brokers", "localhost:9092"}
	avro := []string{"-encoder", "avro", "-schema-registry", "http://registry:8081"}
	token := writeFile(t, "token", "t0ken\n")
	ca := writeFile(t, "ca.pem", string(newTestCA(t).certPEM))
	for _, tt := range []struct {
		args    []string
		problem string // "" when valid
	}{
		{[]string{"-encoder", "avro", "-schema-registry", "http://registry:8081,http://registry2:8081"}, ""},
		{[]string{"-encoder", "avro"}, "-encoder avro, json-schema and debezium-avro need -schema-registry"},
		{[]string{"-encoder", "json-schema"}, "-encoder avro, json-schema and debezium-avro need -schema-registry"},
		{[]string{"-encoder", "json-schema", "-schema-registry", "http://registry:8081", "-schema-registry-token-file", token}, ""},
		{[]string{"-encoder", "json-schema", "-schema-registry", "http://registry:8081", "-schema-registry-subjects", "TopicRecordNameStrategy", "-schema-registry-namespace", "db1"}, ""},
		{[]string{"-encoder", "json-schema", "-schema-registry", "http://registry:8081", "-schema-registry-namespace", "db1"}, `-schema-registry-namespace "db1" applies to the RecordName and TopicRecordName subject strategies only`},
		{[]string{"-schema-registry", "http://registry:8081"}, `the Schema Registry's flags (-schema-registry) apply to -encoder avro, json-schema and debezium-avro only, not "json"`},
		{[]string{"-schema-registry-token-file", token, "-schema-registry-subjects", "RecordNameStrategy"}, `(-schema-registry-subjects, -schema-registry-token-file) apply to -encoder avro, json-schema and debezium-avro only`},
		{[]string{"-encoder", "avro", "-schema-registry", "http://registry:8081", "-schema-registry-user", "u"}, "-schema-registry-user and -schema-registry-password-file go together"},
		{append(avro, "-schema-registry-subjects", "RecordNameStrategy", "-schema-registry-namespace", "db1.cdc"), ""},
		{append(avro, "-schema-registry-subjects", "recordname"), `-schema-registry-subjects "recordname": want TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy`},
		{append(avro, "-schema-registry-namespace", "db1"), "applies to the RecordName and TopicRecordName subject strategies only"},
		{append(avro, "-schema-registry-subjects", "RecordNameStrategy", "-schema-registry-namespace", "db-1"), `-schema-registry-namespace "db-1" is not an Avro namespace`},
		{append(avro, "-schema-registry-tls-ca", ca), `-schema-registry "http://registry:8081": -schema-registry-tls-ca, -schema-registry-tls-cert and -schema-registry-tls-key need https:// URLs`},
		{[]string{"-encoder", "avro", "-schema-registry", "https://registry:8081", "-schema-registry-tls-ca", ca}, ""},
		{[]string{"-encoder", "avro", "-schema-registry", "https://registry:8081", "-schema-registry-tls-ca", token}, "-schema-registry-tls-*: TLS CA (" + token + "): no PEM certificate found"},
		{[]string{"-encoder", "avro", "-schema-registry", "https://registry:8081", "-schema-registry-tls-cert", ca}, "-schema-registry-tls-cert and -schema-registry-tls-key go together"},
		{append(avro, "-schema-registry-token-file", token), ""},
		{append(avro, "-schema-registry-token-file", token, "-schema-registry-user", "u", "-schema-registry-password-file", token), "give the registry one kind of authentication"},
		{append(avro, "-schema-registry-token-file", token+".missing"), "-schema-registry-token-file: open " + token + ".missing"},
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
			_, isAvro := kcfg.Encoder.(*kafkasinkavro.Encoder)
			_, isJSON := kcfg.Encoder.(*jsonschema.Encoder)
			if want := slices.Contains(tt.args, "json-schema"); isAvro == want || isJSON != want {
				t.Errorf("%q: Encoder %T", tt.args, kcfg.Encoder)
			}
		case err == nil || !strings.Contains(err.Error(), tt.problem):
			t.Errorf("%q: %v, want a problem %q", tt.args, err, tt.problem)
		}
	}
}

// TestStreamsWithSchemaRegistry runs the program with -encoder avro and
// with -encoder json-schema against the real PostgreSQL, Kafka and Schema
// Registry: each row arrives in its topic in the Confluent wire format,
// key and value, and decodes with the schema the registry has under the
// record's id (Avro with twmb/avro, not the encoder's code; JSON after a
// check that the schema is a JSON Schema) into the row the database holds.
func TestStreamsWithSchemaRegistry(t *testing.T) {
	registry := os.Getenv(envSchemaRegistry)
	if registry == "" {
		t.Skipf("%s not set: start scripts/testenv.sh (up-registry) and eval \"$(scripts/testenv.sh env)\"", envSchemaRegistry)
	}
	reg, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		encoder string
		decode  func(t *testing.T, s sr.Schema, payload []byte) map[string]any
	}{
		{"avro", func(t *testing.T, s sr.Schema, payload []byte) map[string]any {
			var v map[string]any
			if _, err := avro.MustParse(s.Schema).Decode(payload, &v); err != nil {
				t.Fatalf("decoding with the registry's schema: %v", err)
			}
			return v
		}},
		{"json-schema", func(t *testing.T, s sr.Schema, payload []byte) map[string]any {
			var v map[string]any
			if s.Type != sr.TypeJSON {
				t.Fatalf("the registry's schema is %s, want JSON", s.Type)
			}
			if err := json.Unmarshal(payload, &v); err != nil {
				t.Fatalf("decoding the JSON: %v", err)
			}
			return v
		}},
	} {
		t.Run(tc.encoder, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			pg, brokers, name, db := realTable(ctx, t, "kafkasink_"+strings.ReplaceAll(tc.encoder, "-", "_"))

			args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
				"-topic-prefix", name, "-partitions", "1", "-encoder", tc.encoder, "-schema-registry", registry,
				"-batch-max-wait", "20ms", "-log-format", "text"}
			out, status, stop := startProgram(ctx, t, db, name, brokers, args)
			if _, err := db.Exec(ctx, "INSERT INTO "+name+" VALUES (1, 'one'), (2, NULL)"); err != nil {
				t.Fatal(err)
			}
			topic := name + ".public." + name
			waitFor(t, 60*time.Second, "2 records in "+topic, status, out, func() bool {
				return len(kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic)) >= 2
			})
			t.Cleanup(func() {
				for _, s := range []string{topic + "-key", topic + "-value"} {
					reg.DeleteSubject(context.Background(), s, sr.SoftDelete)
					reg.DeleteSubject(context.Background(), s, sr.HardDelete)
				}
			})
			decode := func(b []byte) map[string]any {
				t.Helper()
				if len(b) < 5 || b[0] != 0 {
					t.Fatalf("not the Confluent wire format: %x", b)
				}
				s, err := reg.SchemaByID(ctx, int(binary.BigEndian.Uint32(b[1:5])))
				if err != nil {
					t.Fatal(err)
				}
				return tc.decode(t, s, b[5:])
			}
			var got []string
			for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
				v := decode(r.Value)
				got = append(got, fmt.Sprintf("%v %v %v", decode(r.Key), v["op"], v["after"]))
				if id := kafkasinktest.Header(r, kafkasink.HeaderID); v["id"] != id {
					t.Errorf("the value's id %v, the header's %s", v["id"], id)
				}
			}
			want := []string{"map[id:1] insert map[id:1 note:one]", "map[id:2] insert map[id:2 note:<nil>]"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("records (key, op, after):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			stop()
			if code := <-status; code != 0 {
				t.Fatalf("exit status %d after cancellation, want 0:\n%s", code, out.String())
			}
		})
	}
}

// TestSchemaRegistryBasicAuth: -schema-registry-user and
// -schema-registry-password-file authenticate the encoder's registry
// calls (a registry that demands them accepts its schemas); a wrong
// password is a fatal refusal naming the credentials.
func TestSchemaRegistryBasicAuth(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("cdc:s3cret"))))
	defer reg.Close()
	e := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", Position: kafkasink.Position{LSN: 1},
		Key: []string{"id"}, After: kafkasink.Row{{Name: "id", Value: int32(1)}},
		Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: &kafkasink.TypeInfo{Name: "int4", Modifier: -1}, NotNull: true}}}}
	for _, tt := range []struct {
		password string
		ok       bool
	}{{"s3cret\n", true}, {"wrong\n", false}} {
		o, err := parse([]string{"-pg", "postgres://localhost/db", "-brokers", "localhost:9092", "-encoder", "avro",
			"-schema-registry", reg.URL(), "-schema-registry-user", "cdc", "-schema-registry-password-file", writeFile(t, "registry", tt.password)}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		if err != nil {
			t.Fatal(err)
		}
		enc := kcfg.Encoder.(*kafkasinkavro.Encoder)
		err = enc.Prepare(context.Background(), []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "shop.public.t", KeyColumns: e.Key}})
		switch {
		case tt.ok && err != nil:
			t.Errorf("with the right password: %v", err)
		case !tt.ok && (err == nil || !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "credentials")):
			t.Errorf("with a wrong password: %v, want a fatal error naming the credentials", err)
		}
	}
}
