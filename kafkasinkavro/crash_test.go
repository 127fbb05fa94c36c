package kafkasinkavro_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

var (
	crashavroOnce sync.Once
	crashavroBin  string
	crashavroErr  error
)

// crashavro builds internal/crashavro once per test binary.
func crashavro(t *testing.T) string {
	t.Helper()
	crashavroOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crashavro")
		if err != nil {
			crashavroErr = err
			return
		}
		crashavroBin = filepath.Join(dir, "crashavro")
		if out, err := exec.Command("go", "build", "-o", crashavroBin, "./internal/crashavro").CombinedOutput(); err != nil {
			crashavroErr = fmt.Errorf("building crashavro: %v\n%s", err, out)
		}
	})
	if crashavroErr != nil {
		t.Fatal(crashavroErr)
	}
	return crashavroBin
}

// TestKilledBetweenRegistrationAndCommit SIGKILLs the pipeline after it
// registered the schema of a new table version (ADD COLUMN while
// streaming) and before any record of that batch was produced, then
// starts it again: the restarted pipeline registers the same schema again
// (the registry answers with the id it has: no new version), and every row
// is in the topic exactly once for read_committed consumers, each record
// with its own table version's schema id.
func TestKilledBetweenRegistrationAndCommit(t *testing.T) {
	e := newAvroEnv(t)
	table := e.table("crash", "id int PRIMARY KEY, a text")
	topic := e.name + ".public." + table
	start := func(hold string) (*exec.Cmd, *bufio.Scanner) {
		t.Helper()
		cmd := exec.Command(crashavro(t), "-pg", e.pg, "-brokers", strings.Join(e.brokers, ","),
			"-registry", kafkasinktest.Env(t, envSchemaRegistry)[0], "-name", e.name, "-table", "public."+table, "-hold-column", hold)
		cmd.Stderr = testWriter{t}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitFor(t, 30*time.Second, "the slot", e.slotStreaming, nil)
		return cmd, bufio.NewScanner(out)
	}

	first, stdout := start("b")
	e.exec("INSERT INTO " + table + " VALUES (1, 'one')")
	e.readRecords(topic, 1, nil)
	e.exec("ALTER TABLE " + table + " ADD COLUMN b int")
	e.exec("INSERT INTO " + table + " VALUES (2, 'two', 22)")
	prepared := make(chan bool, 1)
	go func() { prepared <- stdout.Scan() && stdout.Text() == "prepared" }()
	select {
	case ok := <-prepared:
		if !ok {
			t.Fatal("crashavro ended without preparing the new table version")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("crashavro did not prepare the new table version within 60s")
	}
	versions := func() []int {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		v, err := e.registry.SubjectVersions(ctx, topic+"-value")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := versions(); len(v) != 2 {
		t.Fatalf("after Prepare the subject has versions %v, want 2: the new one registered before its records", v)
	}
	if err := first.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	first.Wait()
	if n := len(kafkasinktest.ReadCommittedRaw(t, e.brokers, topic)); n != 1 {
		t.Fatalf("after the kill the topic holds %d committed records, want 1", n)
	}

	_, _ = start("")
	e.exec("INSERT INTO " + table + " VALUES (3, 'three', 33)")
	recs := e.readRecords(topic, 3, nil)
	want := []string{"map[a:one id:1]", "map[a:two b:22 id:2]", "map[a:three b:33 id:3]"}
	seen := map[string]bool{}
	var ids []int
	for i, r := range recs {
		id := kafkasinktest.Header(r, kafkasink.HeaderID)
		if seen[id] {
			t.Errorf("event %s is in the topic twice", id)
		}
		seen[id] = true
		d := e.decode(r.Value)
		ids = append(ids, d.id)
		if got := fmt.Sprint(d.value["after"]); got != want[i] {
			t.Errorf("record %d: after %s, want %s", i, got, want[i])
		}
	}
	if v := versions(); len(v) != 2 {
		t.Errorf("after the restart the subject has versions %v, want the same 2: registering again is idempotent", v)
	}
	if ids[0] == ids[1] || ids[1] != ids[2] {
		t.Errorf("schema ids %v: want the first version's, then the second's twice", ids)
	}
}
