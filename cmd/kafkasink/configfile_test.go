package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// writeFile writes content to a new file named name in a temporary
// directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func noEnv(string) string { return "" }

// TestExampleConfigSetsEveryOption keeps kafkasink.example.yaml true: it
// has a key for every flag but -config, it loads, its options are valid,
// and each key sets the same as its flag given the same value.
func TestExampleConfigSetsEveryOption(t *testing.T) {
	const sample = "kafkasink.example.yaml"
	fs, _ := defineFlags(new(options))
	values, err := loadConfigFile(sample, fileKeys(fs))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := values[configKey(f.Name)]; !ok && f.Name != "config" {
			missing = append(missing, configKey(f.Name))
		}
	})
	if missing != nil {
		t.Errorf("%s has no key for %s: add them", sample, strings.Join(missing, ", "))
	}

	// The secrets' and the CA's files must exist for the options to be
	// valid (the CA's is read to check it); flags
	// win over the file.
	secrets := []string{"-pg-password-file", writeFile(t, "pg", "pg-secret\n"),
		"-sasl-password-file", writeFile(t, "kafka", "kafka-secret\n"),
		"-tls-ca", writeFile(t, "ca.pem", string(newTestCA(t).certPEM))}
	fromFile, err := parse(append([]string{"-config", sample}, secrets...), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, pcfg, err := fromFile.configs(nil)
	if err != nil {
		t.Fatalf("%s: %v", sample, err)
	}
	if !slices.Equal(kcfg.Brokers, []string{"kafka-1.example.com:9092", "kafka-2.example.com:9092"}) ||
		!slices.Equal(pcfg.Tables, []string{"public.orders", "public.customers"}) ||
		kcfg.Topics.Routes["public.customers"] != "shop.customers" || pcfg.BatchMaxWait != 20*time.Millisecond ||
		kcfg.SASL == nil || kcfg.SASL.Password != "kafka-secret" || !pcfg.Snapshot || fromFile.httpAddr != "127.0.0.1:9187" {
		t.Errorf("%s read as Brokers %q, Tables %q, Routes %v, BatchMaxWait %v, SASL %v, Snapshot %t, -http-addr %q",
			sample, kcfg.Brokers, pcfg.Tables, kcfg.Topics.Routes, pcfg.BatchMaxWait, kcfg.SASL, pcfg.Snapshot, fromFile.httpAddr)
	}

	var args []string
	for key, v := range values {
		args = append(args, "-"+flagOf(t, fs, key)+"="+v.value)
	}
	fromFlags, err := parse(append(args, secrets...), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fromFile.configFile = ""
	if !reflect.DeepEqual(fromFile, fromFlags) {
		t.Errorf("the file and the same values as flags differ:\nfile  %+v\nflags %+v", fromFile, fromFlags)
	}
}

// flagOf is the flag whose key is key.
func flagOf(t *testing.T, fs *flag.FlagSet, key string) string {
	var name string
	fs.VisitAll(func(f *flag.Flag) {
		if configKey(f.Name) == key {
			name = f.Name
		}
	})
	if name == "" {
		t.Fatalf("no flag has the key %s", key)
	}
	return name
}

// TestConfigKeysAreDistinct: two flags with one key could not be told
// apart in the file.
func TestConfigKeysAreDistinct(t *testing.T) {
	fs, settings := defineFlags(new(options))
	seen := make(map[string]string)
	fs.VisitAll(func(f *flag.Flag) {
		if other, dup := seen[configKey(f.Name)]; dup {
			t.Errorf("-%s and -%s have the same key %s", other, f.Name, configKey(f.Name))
		}
		seen[configKey(f.Name)] = f.Name
		if want := "KAFKASINK_" + strings.ToUpper(configKey(f.Name)); settings[f.Name].env != want {
			t.Errorf("-%s: environment variable %s, want %s like the others", f.Name, settings[f.Name].env, want)
		}
	})
}

// TestConfigPrecedence: flags win over the environment, which wins over
// the file, which wins over the defaults; -config wins over
// $KAFKASINK_CONFIG.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "kafkasink.yaml", "slot: file_slot\nbatch_max_events: 10\nmode: idempotent\nencoder: upsert\n")
	environ := map[string]string{"KAFKASINK_CONFIG": file, "KAFKASINK_SLOT": "env_slot", "KAFKASINK_BATCH_MAX_EVENTS": "20"}
	getenv := func(k string) string { return environ[k] }
	for _, tc := range []struct {
		args                 []string
		slot, mode, encoder  string
		batchEvents, partits int
	}{
		{nil, "env_slot", "idempotent", "upsert", 20, 0},
		{[]string{"-slot", "flag_slot", "-encoder", "json", "-partitions", "3"}, "flag_slot", "idempotent", "json", 20, 3},
		{[]string{"-config", writeFile(t, "other.yaml", "mode: plain\n")}, "env_slot", "plain", "json", 20, 0},
	} {
		o, err := parse(tc.args, getenv, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.slot != tc.slot || o.mode != tc.mode || o.encoder != tc.encoder || o.batchEvents != tc.batchEvents || o.partitions != tc.partits {
			t.Errorf("%q: slot %s, mode %s, encoder %s, batch %d, partitions %d; want %s, %s, %s, %d, %d", tc.args,
				o.slot, o.mode, o.encoder, o.batchEvents, o.partitions, tc.slot, tc.mode, tc.encoder, tc.batchEvents, tc.partits)
		}
	}
}

// TestConfigFileRefusals: what the file cannot say is refused, naming the
// file, the line and the key, every problem at once; secrets are refused
// naming what to use instead; the program exits with status 2.
func TestConfigFileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"unknown key", "slot: a\nbatch-max-wait: 1s\n", []string{`f.yaml:2: unknown key "batch-max-wait" (did you mean batch_max_wait?)`}},
		{"a key not a flag", "slot: a\nconfig: other.yaml\n", []string{`f.yaml:2: unknown key "config"`}},
		{"every problem at once", "slott: a\nmode: plain\npublicaton: b\n", []string{`f.yaml:1: unknown key "slott"`, `f.yaml:3: unknown key "publicaton"`}},
		{"SASL password", "sasl_password: hunter2\n", []string{"f.yaml:1: sasl_password: a configuration file must not hold secrets; use sasl_password_file (-sasl-password-file) or $KAFKASINK_SASL_PASSWORD"}},
		{"PostgreSQL password", "pg_password: hunter2\n", []string{"f.yaml:1: pg_password:", "pg_password_file (-pg-password-file) or $PGPASSWORD"}},
		{"registry token", "schema_registry_token: abc\n", []string{"f.yaml:1: schema_registry_token:", "schema_registry_token_file (-schema-registry-token-file)"}},
		{"password in a URL", "pg: postgres://cdc:hunter2@db/shop\n", []string{"f.yaml:1: pg: the connection string holds a password", "pg_password_file"}},
		{"password parameter", "pg: postgres://cdc@db/shop?password=hunter2\n", []string{"f.yaml:1: pg: the connection string holds a password"}},
		{"password keyword", "pg: host=db user=cdc password=hunter2\n", []string{"f.yaml:1: pg: the connection string holds a password"}},
		{"not an integer", "slot: a\n\nbatch_max_events: many\n", []string{`f.yaml:3: batch_max_events: "many" is not an integer`}},
		{"not a duration", "batch_max_wait: 20\n", []string{`f.yaml:1: batch_max_wait: "20" is not a duration such as 250ms`}},
		{"not a slot gap policy", "slot_gap: ignore\n", []string{`f.yaml:1: slot_gap: "ignore" is not refuse, resnapshot or accept`}},
		{"not a boolean", "snapshot: often\n", []string{`f.yaml:1: snapshot: "often" is not true or false`}},
		{"a mapping", "slot:\n  name: a\n", []string{"f.yaml:2: slot: want a single value, found a mapping"}},
		{"a sequence", "slot: [a, b]\n", []string{"f.yaml:1: slot: want a single value, found a sequence"}},
		{"a sequence of mappings", "tables: [{a: b}]\n", []string{"f.yaml:1: tables: want a value or a sequence of values, found a sequence"}},
		{"no value", "slot:\n", []string{"f.yaml:1: slot: want a single value, found a null (no value: leave the key out for the default)"}},
		{"twice", "slot: a\nslot: b\n", []string{"f.yaml:2: slot is set twice (first at line 1)"}},
		{"two documents", "slot: a\n---\nslot: b\n", []string{"want one YAML document"}},
		{"not a mapping", "- slot\n", []string{"f.yaml:1: want a mapping of settings (key: value), found a sequence"}},
		{"not YAML", "slot: [a\n", []string{"f.yaml: yaml:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "f.yaml", tc.content)
			_, err := parse([]string{"-config", path}, noEnv, io.Discard)
			if err == nil {
				t.Fatalf("%q was accepted", tc.content)
			}
			msg := strings.ReplaceAll(err.Error(), filepath.Dir(path)+string(filepath.Separator), "")
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q shows the secret", msg)
			}
		})
	}
	if _, err := parse([]string{"-config", "/nonexistent.yaml"}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "-config: open /nonexistent.yaml") {
		t.Errorf("a missing file: %v, want an error naming -config and the file", err)
	}
	var stderr bytes.Buffer
	path := writeFile(t, "f.yaml", "slott: a\n")
	if code := run(context.Background(), []string{"-config", path}, noEnv, &stderr); code != 2 || !strings.Contains(stderr.String(), "slott") {
		t.Errorf("run with an unknown key: status %d, output %q; want 2 and the key", code, stderr.String())
	}
	if code := run(context.Background(), []string{"-config", writeFile(t, "empty.yaml", "# nothing yet\n")}, noEnv, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "-pg is required") || !strings.Contains(stderr.String(), "[flag -pg, YAML pg, env KAFKASINK_PG]") {
		t.Errorf("run with an empty file: status %d, output %q; want 2 and the required settings", code, stderr.String())
	}
}

// TestSecretFiles: the passwords come from files (a trailing newline
// dropped) or the environment, one way each; the PostgreSQL password file
// is read for every connection, so a rotated password is used; no error
// shows a secret.
func TestSecretFiles(t *testing.T) {
	base := []string{"-pg", "postgres://cdc@db/shop", "-brokers", "b:9092"}
	configs := func(args []string, env map[string]string) (kafkasink.Config, func(context.Context, *pgconn.Config) error, error) {
		t.Helper()
		o, err := parse(append(slices.Clone(base), args...), func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, pcfg, err := o.configs(nil)
		return kcfg, pcfg.ConfigureConn, err
	}

	kafkaFile := writeFile(t, "kafka", "kafka-secret\r\n")
	kcfg, _, err := configs([]string{"-sasl-mechanism", "scram-sha-256", "-sasl-user", "cdc", "-sasl-password-file", kafkaFile}, nil)
	if err != nil || kcfg.SASL == nil || kcfg.SASL.Password != "kafka-secret" {
		t.Errorf("-sasl-password-file: SASL %+v, %v; want the file's password without its line end", kcfg.SASL, err)
	}
	_, _, err = configs([]string{"-sasl-mechanism", "plain", "-sasl-password-file", kafkaFile}, map[string]string{"KAFKASINK_SASL_PASSWORD": "env-secret"})
	if err == nil || !strings.Contains(err.Error(), "$KAFKASINK_SASL_PASSWORD and -sasl-password-file are both set") {
		t.Errorf("both SASL passwords: %v, want a refusal naming both", err)
	}
	if _, _, err = configs([]string{"-sasl-password-file", kafkaFile}, nil); err == nil || !strings.Contains(err.Error(), "-sasl-mechanism is not set") {
		t.Errorf("-sasl-password-file without a mechanism: %v, want a refusal", err)
	}

	pgFile := writeFile(t, "pg", "first\n")
	_, configure, err := configs([]string{"-pg-password-file", pgFile}, nil)
	if err != nil || configure == nil {
		t.Fatalf("-pg-password-file: ConfigureConn set %t, %v", configure != nil, err)
	}
	for _, want := range []string{"first", "rotated"} {
		if err := os.WriteFile(pgFile, []byte(want+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var c pgconn.Config
		if err := configure(context.Background(), &c); err != nil || c.Password != want {
			t.Errorf("a connection after the file says %q: password %q, %v", want, c.Password, err)
		}
	}
	if _, configure, err := configs(nil, nil); configure != nil || err != nil {
		t.Errorf("no -pg-password-file: ConfigureConn set (%v), %v", configure != nil, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-pg", "postgres://cdc:hunter2@db/shop", "-pg-password-file", pgFile}, "-pg holds a password and -pg-password-file is set"},
		{[]string{"-pg-password-file", "/nonexistent"}, "-pg-password-file: open /nonexistent"},
		{[]string{"-pg-password-file", writeFile(t, "empty", "\n")}, "empty is empty"},
	} {
		_, _, err := configs(tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want an error saying %q without the secret", tc.args, err, tc.want)
		}
	}
}
