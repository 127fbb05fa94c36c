package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestOffsetsShowAndReset runs offsets show and reset against the real
// PostgreSQL and Kafka around the program: while it runs, show reads its
// checkpoint (fencing nothing: it goes on streaming) and names the
// lease's holder, and reset refuses; once it stopped, -to current
// reports only, an LSN without -yes writes nothing, one below the slot
// is refused, and one with -yes moves the checkpoint so that the next
// run skips the change committed before it and delivers the one after;
// -to resnapshot drops the slot and deletes the checkpoint, and the next
// run with -snapshot reads every row again.
func TestOffsetsShowAndReset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_offsets")
	topic := name + ".public." + name
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-batch-max-wait", "20ms", "-progress", "0", "-log-format", "text"}
	getenv := func(k string) string { return env(k, brokers) }
	offsetsCmd := func(extra ...string) (int, string, offsetsDoc) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := offsets(ctx, append(append(extra[:1:1], args...), extra[1:]...), getenv, &stdout, &stderr)
		var doc offsetsDoc
		if i := strings.Index(stdout.String(), "{"); i >= 0 {
			if err := json.Unmarshal(stdout.Bytes()[i:], &doc); err != nil {
				t.Fatalf("offsets %q printed no JSON: %v\n%s", extra, err, stdout.String())
			}
		}
		return code, stdout.String() + stderr.String(), doc
	}
	insert := func(id int) {
		t.Helper()
		if _, err := db.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d, 'row %d')", name, id, id)); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() map[int64]int {
		seen := make(map[int64]int)
		for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
			seen[rowID(t, r)]++
		}
		return seen
	}
	stopped := func(status chan int, stop context.CancelFunc, out *kafkasinktest.LogBuffer) {
		t.Helper()
		stop()
		select {
		case code := <-status:
			if code != 0 {
				t.Fatalf("exit status %d after cancellation:\n%s", code, out.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("did not stop:\n%s", out.String())
		}
	}

	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	for id := 1; id <= 3; id++ {
		insert(id)
	}
	waitFor(t, 60*time.Second, "rows 1 to 3", status, out, func() bool { return len(rows()) == 3 })

	code, text, doc := offsetsCmd("show", "-o", "json")
	if code != 0 || doc.Position == "" || doc.LeaseHolder == "" || doc.SlotActivePID == 0 || !strings.Contains(string(doc.Cursor), `"source"`) {
		t.Fatalf("offsets show while running: status %d, want 0, a checkpoint with pgcdc's cursor, the lease's holder and the slot's walsender:\n%s", code, text)
	}
	running := doc.Position
	code, text, _ = offsetsCmd("reset", "-to", doc.SlotConfirmed, "-yes")
	if code != 1 || !strings.Contains(text, "an instance holds the lease of slot") {
		t.Fatalf("offsets reset while running: status %d, want 1 and the lease named:\n%s", code, text)
	}
	insert(4)
	waitFor(t, 60*time.Second, "row 4 after show and the refused reset", status, out, func() bool { return len(rows()) == 4 })
	stopped(status, stop, out)

	code, text, doc = offsetsCmd("reset", "-to", "current", "-o", "json")
	if code != 0 || !strings.Contains(text, "stays at") || doc.Position == running || doc.Position == "" || doc.LeaseHolder != "" {
		t.Fatalf("offsets reset -to current: status %d, want 0, the checkpoint past %s and the lease free:\n%s", code, running, text)
	}
	before := doc

	insert(5)
	var skipTo string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&skipTo); err != nil {
		t.Fatal(err)
	}
	code, text, _ = offsetsCmd("reset", "-to", skipTo)
	if _, _, doc := offsetsCmd("show", "-o", "json"); code != 1 || !strings.Contains(text, "add -yes") || doc.Position != before.Position {
		t.Fatalf("offsets reset without -yes: status %d, want 1, and nothing written (the checkpoint is at %s):\n%s", code, doc.Position, text)
	}
	code, text, _ = offsetsCmd("reset", "-to", "0/1", "-yes")
	if code != 1 || !strings.Contains(text, "below slot") {
		t.Fatalf("offsets reset below the slot: status %d, want 1 and why:\n%s", code, text)
	}
	code, text, doc = offsetsCmd("reset", "-to", skipTo, "-yes", "-o", "json")
	if code != 0 || !strings.HasPrefix(doc.Position, skipTo+":") || string(doc.Cursor) != string(before.Cursor) {
		t.Fatalf("offsets reset -to %s -yes: status %d, want 0, the checkpoint there and the cursor kept:\n%s", skipTo, code, text)
	}

	out, status, stop = startProgram(ctx, t, db, name, brokers, args)
	insert(6)
	waitFor(t, 60*time.Second, "row 6 after the reset", status, out, func() bool { return rows()[6] == 1 })
	if seen := rows(); seen[5] != 0 {
		t.Fatalf("row 5, committed before the checkpoint the reset set, was delivered: %v", seen)
	}
	stopped(status, stop, out)

	if code, text, _ := offsetsCmd("reset", "-to", "resnapshot", "-yes"); code != 2 || !strings.Contains(text, "-snapshot") {
		t.Fatalf("-to resnapshot without -snapshot: status %d, want 2 and the flag named:\n%s", code, text)
	}
	code, text, doc = offsetsCmd("reset", "-to", "resnapshot", "-yes", "-snapshot", "-o", "json")
	if code != 0 || doc.Position != "" || doc.SlotConfirmed != "" {
		t.Fatalf("offsets reset -to resnapshot: status %d, want 0, no checkpoint and no slot:\n%s", code, text)
	}
	out, status, stop = startProgram(ctx, t, db, name, brokers, append(args, "-snapshot"))
	waitFor(t, 60*time.Second, "every row read again", status, out, func() bool {
		seen := rows()
		return seen[1] == 2 && seen[4] == 2 && seen[5] == 1 && seen[6] == 2
	})
	stopped(status, stop, out)
}
