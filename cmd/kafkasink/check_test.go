package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runCheck runs kafkasink check -o json with args and env, and returns
// its exit status and findings (none when it printed no JSON).
func runCheck(t *testing.T, ctx context.Context, args []string, env map[string]string) (int, []finding, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := check(ctx, append([]string{"-o", "json"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
	var findings []finding
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &findings); err != nil {
			t.Fatalf("check -o json printed no JSON list: %v\n%s", err, stdout.String())
		}
	}
	return code, findings, stdout.String() + stderr.String()
}

// withRole returns pg with its user and password replaced.
func withRole(t *testing.T, pg, user, password string) string {
	t.Helper()
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// TestCheckFindsEachProblem sets up a real PostgreSQL and Kafka (and
// fake clusters for what the shared broker cannot be: ACLs, a lower
// transaction.max.timeout.ms) wrong in one way per case, and checks that
// kafkasink check fails (exit 1) on that problem alone, with its fix;
// and that it passes (exit 0) on the right setup.
func TestCheckFindsEachProblem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_check")
	password := "check-" + name
	t.Cleanup(func() {
		// Before realTable's cleanup, which closes db.
		for _, sql := range []string{
			"DROP TABLE IF EXISTS " + name + "_nokey", "DROP TABLE IF EXISTS " + name + "_other",
			"DROP OWNED BY " + name + "_norepl", "DROP ROLE IF EXISTS " + name + "_norepl",
			"DROP OWNED BY " + name + "_nosel", "DROP ROLE IF EXISTS " + name + "_nosel",
		} {
			db.Exec(context.Background(), sql)
		}
	})
	for _, sql := range []string{
		"CREATE TABLE " + name + "_nokey (note text)",
		"CREATE TABLE " + name + "_other (id int PRIMARY KEY)",
		"CREATE PUBLICATION " + name + " FOR TABLE " + name + ", " + name + "_nokey",
		fmt.Sprintf("CREATE ROLE %s_norepl LOGIN PASSWORD '%s'", name, password),
		fmt.Sprintf("GRANT SELECT ON %s TO %s_norepl", name, name),
		fmt.Sprintf("CREATE ROLE %s_nosel LOGIN REPLICATION PASSWORD '%s'", name, password),
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// Checkpoint topics set up wrong on the real broker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deleting, isr := name+".ckpt-delete", name+".ckpt-isr"
	t.Cleanup(func() { adm.DeleteTopics(context.Background(), deleting, isr) })
	for topic, configs := range map[string]map[string]*string{
		deleting: {"cleanup.policy": kadm.StringPtr("delete")},
		isr:      {"cleanup.policy": kadm.StringPtr("compact"), "min.insync.replicas": kadm.StringPtr("2")},
	} {
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
	}

	// A fake cluster whose transaction.max.timeout.ms is below the
	// sink's default transaction timeout, and one with ACLs.
	shortTxn, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "30000"}))
	if err != nil {
		t.Fatal(err)
	}
	defer shortTxn.Close()
	// The users of the cluster with ACLs may create the output topics
	// (prefix out) unless the case says otherwise.
	out := "out-" + name
	outputs := []kfake.ACL{
		{Resource: kmsg.ACLResourceTypeTopic, Name: out, Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationDescribe, Allow: true},
		{Resource: kmsg.ACLResourceTypeTopic, Name: out, Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationCreate, Allow: true},
	}
	checkpoint := []kfake.ACL{
		{Resource: kmsg.ACLResourceTypeTopic, Name: name + ".ckpt", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true},
		{Resource: kmsg.ACLResourceTypeTopic, Name: name + ".ckpt", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationCreate, Allow: true},
	}
	txnWrite := kfake.ACL{Resource: kmsg.ACLResourceTypeTransactionalId, Name: "kafkasink-" + name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite, Allow: true}
	acls, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("SCRAM-SHA-256", "nobody", "nobody-secret", append(outputs, checkpoint...)...),
		kfake.User("SCRAM-SHA-256", "nocreate", "nocreate-secret", append(outputs, txnWrite, checkpoint[0])...),
		kfake.User("SCRAM-SHA-256", "noidem", "noidem-secret", append(outputs, checkpoint...)...),
		kfake.User("SCRAM-SHA-256", "noout", "noout-secret", append(checkpoint, txnWrite, outputs[0])...),
		kfake.User("SCRAM-SHA-256", "nodescribe", "nodescribe-secret", append(checkpoint, txnWrite)...),
		kfake.User("SCRAM-SHA-256", "nockpt", "nockpt-secret", append(outputs, txnWrite)...),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer acls.Close()
	fakeAddr := func(c *kfake.Cluster) string { return strings.Join(c.ListenAddrs(), ",") }

	// A closed port for the registry that is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downRegistry := "http://" + ln.Addr().String()
	ln.Close()

	// The right setup: the table with a key, and the rest of the
	// publication accepted. Each case adds flags to it, which win (the
	// last value of a flag does).
	withKey, keyless, other := "public."+name, "public."+name+"_nokey", "public."+name+"_other"
	right := []string{"-pg", pg, "-brokers", brokers, "-slot", name, "-publication", name, "-tables", withKey, "-accept-publication-tables=true"}
	sasl := func(user string, more ...string) []string {
		return append([]string{"-brokers", fakeAddr(acls), "-sasl-mechanism", "SCRAM-SHA-256", "-sasl-user", user, "-checkpoint-topic", name + ".ckpt", "-topic-prefix", out}, more...)
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check string // the failing check's name
		fix   string // in its fix
	}{
		{"publication missing a table", []string{"-tables", withKey + "," + other}, nil,
			"publication tables", "ALTER PUBLICATION " + name + " ADD TABLE " + other},
		{"publication with a table not in -tables", []string{"-accept-publication-tables=false"}, nil, "publication tables", "-accept-publication-tables"},
		{"no such table", []string{"-tables", withKey + ",public.nosuch_" + name}, nil, "table public.nosuch_" + name, "correct -tables"},
		{"table without replica identity", []string{"-tables", withKey + "," + keyless}, nil, "replica identity " + keyless, "REPLICA IDENTITY FULL"},
		{"role without REPLICATION", []string{"-pg", withRole(t, pg, name+"_norepl", password)}, nil,
			"role REPLICATION", "ALTER ROLE " + name + "_norepl REPLICATION"},
		{"role without SELECT", []string{"-pg", withRole(t, pg, name+"_nosel", password)}, nil,
			"SELECT " + withKey, "GRANT SELECT ON " + withKey},
		{"slot missing and -create=false", []string{"-create=false"}, nil, "slot", "pg_create_logical_replication_slot"},
		{"checkpoint topic not compacted", []string{"-checkpoint-topic", deleting}, nil, "checkpoint topic " + deleting, "cleanup.policy=compact"},
		{"checkpoint topic's min ISR above its replicas", []string{"-checkpoint-topic", isr}, nil, "checkpoint topic " + isr, "lower its min.insync.replicas to 1"},
		{"transaction timeout above the broker's", []string{"-brokers", fakeAddr(shortTxn)}, nil, "transaction timeout", "lower -transaction-timeout to 30s"},
		{"principal without the transactional id ACL", sasl("nobody"), map[string]string{"KAFKASINK_SASL_PASSWORD": "nobody-secret"},
			"transactional id ACL", "grant WRITE and DESCRIBE on TransactionalId \"kafkasink-" + name + "\""},
		{"principal that may not create the missing checkpoint topic", sasl("nocreate"), map[string]string{"KAFKASINK_SASL_PASSWORD": "nocreate-secret"},
			"checkpoint topic " + name + ".ckpt", "grant CREATE on topic"},
		{"principal without idempotent write", sasl("noidem", "-mode", "idempotent"), map[string]string{"KAFKASINK_SASL_PASSWORD": "noidem-secret"},
			"idempotent write ACL", "IDEMPOTENT_WRITE"},
		{"principal that may not create an output topic", sasl("noout"), map[string]string{"KAFKASINK_SASL_PASSWORD": "noout-secret"},
			"topic " + out + ".public." + name, "grant CREATE on topic"},
		{"principal that may not describe an output topic", sasl("nodescribe"), map[string]string{"KAFKASINK_SASL_PASSWORD": "nodescribe-secret"},
			"topic " + out + ".public." + name, "grant DESCRIBE and WRITE on topic"},
		{"principal that may not describe the checkpoint topic", sasl("nockpt"), map[string]string{"KAFKASINK_SASL_PASSWORD": "nockpt-secret"},
			"checkpoint topic " + name + ".ckpt", "grant DESCRIBE, READ and WRITE on topic"},
		{"schema registry down", []string{"-encoder", "avro", "-schema-registry", downRegistry}, nil, "connection", "-schema-registry"},
		// A prefix that is a valid topic name, but makes the table's
		// topic longer than Kafka allows (254 bytes).
		{"output topic name invalid", []string{"-topic-prefix", strings.Repeat("p", 249-len(".public.")-len(name)+5)}, nil,
			"topic of " + withKey, "-topic-routes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, findings, out := runCheck(t, ctx, append(append([]string(nil), right...), c.args...), c.env)
			if code != 1 {
				t.Fatalf("exit status %d, want 1:\n%s", code, out)
			}
			var failed []finding
			for _, f := range findings {
				if f.Status == statusFail {
					failed = append(failed, f)
				}
			}
			if len(failed) != 1 || failed[0].Check != c.check || !strings.Contains(failed[0].Fix, c.fix) || failed[0].Fix == "" {
				t.Fatalf("want one failure, of %q with a fix naming %q; got:\n%s", c.check, c.fix, out)
			}
		})
	}
	t.Run("right setup, and nothing changed", func(t *testing.T) {
		fresh := name + ".ckpt-fresh"
		code, findings, out := runCheck(t, ctx, append(right, "-checkpoint-topic", fresh), nil)
		if code != 0 {
			t.Fatalf("exit status %d, want 0:\n%s", code, out)
		}
		if len(findings) < 10 {
			t.Fatalf("only %d findings:\n%s", len(findings), out)
		}
		var slots int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&slots); err != nil || slots != 0 {
			t.Errorf("check with -create: %d slots named %s (%v), want none", slots, name, err)
		}
		if topics, err := adm.ListTopics(ctx, fresh); err != nil || topics.Has(fresh) {
			t.Errorf("check created the missing checkpoint topic %s (%v)", fresh, err)
		}
	})
	t.Run("run stops on a certain failure before the lease", func(t *testing.T) {
		var out bytes.Buffer
		args := append(append([]string(nil), right...), "-pg", withRole(t, pg, name+"_norepl", password), "-log-format", "text")
		code := run(ctx, args, func(string) string { return "" }, &out)
		if code != 2 || !strings.Contains(out.String(), "ALTER ROLE "+name+"_norepl REPLICATION") || strings.Contains(out.String(), "lease") {
			t.Fatalf("exit status %d, want 2 with the fix, and no lease taken:\n%s", code, out.String())
		}
	})
	t.Run("topic prefix that is no topic name", func(t *testing.T) {
		code, findings, out := runCheck(t, ctx, append(append([]string(nil), right...), "-topic-prefix", "bad/prefix"), nil)
		if code != 2 || findings != nil || !strings.Contains(out, `-topic-prefix: topic name "bad/prefix" has characters outside [a-zA-Z0-9._-]`) {
			t.Fatalf("exit status %d, %d findings, want 2 (a configuration error, before connecting) naming -topic-prefix:\n%s", code, len(findings), out)
		}
	})
	t.Run("table output", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := check(ctx, append(right, "-tables", withKey+","+other), func(string) string { return "" }, &stdout, &stderr)
		want := "FAIL    postgresql       publication tables"
		if code != 1 || !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "fix: ALTER PUBLICATION") {
			t.Fatalf("exit status %d, want 1 and a line %q with its fix below:\n%s%s", code, want, stdout.String(), stderr.String())
		}
	})
}

// TestTakeFlags: a command's own flags are taken out of its arguments,
// in each of the flag package's forms, the rest left for run's flags.
func TestTakeFlags(t *testing.T) {
	for _, c := range []struct {
		args, rest []string
		o, yes     string
		ok         bool
	}{
		{[]string{"-o", "json", "-pg", "x"}, []string{"-pg", "x"}, "json", "false", true},
		{[]string{"-slot", "s", "-o=table", "-yes"}, []string{"-slot", "s"}, "table", "true", true},
		{[]string{"--o", "json", "-other", "--yes=false"}, []string{"-other"}, "json", "false", true},
		{[]string{"-pg", "x", "--", "-o"}, []string{"-pg", "x", "--", "-o"}, "table", "false", true},
		{[]string{"-yes=maybe"}, nil, "", "", false},
		{[]string{"-o"}, nil, "", "", false},
	} {
		own := map[string]string{"o": "table", "yes": "false"}
		rest, err := takeFlags(c.args, own)
		if (err == nil) != c.ok || err == nil && (!slices.Equal(rest, c.rest) || own["o"] != c.o || own["yes"] != c.yes) {
			t.Errorf("takeFlags(%q) = %q, -o %q, -yes %q, %v; want %q, %q, %q", c.args, rest, own["o"], own["yes"], err, c.rest, c.o, c.yes)
		}
	}
	if outputProblem("yaml") == nil || outputProblem("json") != nil {
		t.Error("-o: want json and table only")
	}
}

// TestCheckWalLevel runs check and run against a server whose wal_level
// is not logical, named by KAFKASINK_TEST_PG_NOT_LOGICAL (a role that
// may create a table; scripts/testenv.sh starts none such, since every
// server it starts must be logical: start one with wal_level = replica):
// check fails on wal_level with its fix, and run stops with exit status
// 2 before it waits for the lease.
func TestCheckWalLevel(t *testing.T) {
	pg, brokers := os.Getenv("KAFKASINK_TEST_PG_NOT_LOGICAL"), os.Getenv("KAFKASINK_TEST_BROKERS")
	if pg == "" || brokers == "" {
		t.Skip("KAFKASINK_TEST_PG_NOT_LOGICAL (a server with wal_level = replica) and KAFKASINK_TEST_BROKERS not both set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	name := fmt.Sprintf("kafkasink_wal_%06d", rand.IntN(1e6))
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(context.Background(), "DROP TABLE "+name)
	args := []string{"-pg", pg, "-brokers", brokers, "-slot", name, "-publication", name, "-tables", "public." + name}
	code, findings, out := runCheck(t, ctx, args, nil)
	var wal *finding
	for i := range findings {
		if findings[i].Check == "wal_level" {
			wal = &findings[i]
		}
	}
	if code != 1 || wal == nil || wal.Status != statusFail || !wal.BlocksStart || !strings.Contains(wal.Fix, "ALTER SYSTEM SET wal_level = logical") {
		t.Fatalf("exit status %d, want 1 with wal_level failed, blocking the start, and its fix:\n%s", code, out)
	}
	var log bytes.Buffer
	if code := run(ctx, append(args, "-log-format", "text"), func(string) string { return "" }, &log); code != 2 || !strings.Contains(log.String(), "wal_level = logical") {
		t.Fatalf("run: exit status %d, want 2 naming wal_level:\n%s", code, log.String())
	}
}

// TestCheckFailoverSlotsByVersion: on PostgreSQL 17 and later check
// reports whether the slot survives a failover (a warning for a slot
// without failover, never a failure); before 17, which has no failover
// slots, it says nothing of them. Run it on each version with
// eval "$(scripts/testenv.sh env --pg VERSION)".
func TestCheckFailoverSlotsByVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_failover")
	var version int
	if err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		t.Fatal(err)
	}
	code, findings, out := runCheck(t, ctx, []string{"-pg", pg, "-brokers", brokers, "-slot", name, "-publication", name, "-tables", "public." + name}, nil)
	var failover []finding
	for _, f := range findings {
		if f.Check == "failover slots" {
			failover = append(failover, f)
		}
	}
	switch {
	case code != 0:
		t.Fatalf("exit status %d, want 0:\n%s", code, out)
	case version < 170000 && failover != nil:
		t.Fatalf("PostgreSQL %d has no failover slots, but check reports them:\n%s", version, out)
	case version >= 170000 && (len(failover) != 1 || failover[0].Status != statusWarn || !strings.Contains(failover[0].Detail, "slot failover false")):
		t.Fatalf("PostgreSQL %d: want one warning that slot %s has no failover:\n%s", version, name, out)
	}
	t.Logf("PostgreSQL %d: %v", version, failover)
}
