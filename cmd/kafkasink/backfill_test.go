package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// backfillCLI runs the backfill command against addr and returns its exit
// status and output.
func backfillCLI(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := backfillCommand(context.Background(), append([]string{"-http-addr", addr}, args...), func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// readsBy counts the read records of topic by backfill run id.
func readsBy(t *testing.T, brokers, topic string) map[string]int {
	t.Helper()
	out := make(map[string]int)
	for _, r := range kafkasinktest.ReadCommittedRaw(t, []string{brokers}, topic) {
		if kafkasinktest.Header(r, kafkasink.HeaderOp) != "read" {
			continue
		}
		var v struct {
			RunID string `json:"backfill_run_id"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %q: %v", r.Value, err)
		}
		out[v.RunID]++
	}
	return out
}

// TestBackfillCommand runs the program against the real PostgreSQL and
// Kafka and asks it for backfills with the backfill command, through its
// HTTP endpoints: a backfill is requested, paused (the listing and
// /status and the progress log show it paused), resumed and cancelled; one with a condition
// delivers exactly the rows it matches; an unknown id, an unknown table
// and a missing -table are refused with their reasons, and so is a POST
// that does not say it sends JSON. A table added to the publication is
// backfilled, -backfill-added-tables being on by default.
func TestBackfillCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_bf")
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, 'row ' || g FROM generate_series(1, 3000) g"); err != nil {
		t.Fatal(err)
	}
	added := name + "_add"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
			kadm.NewClient(cl).DeleteTopics(ctx, name+".public."+added)
			cl.Close()
		}
	})
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-partitions", "3", "-batch-max-wait", "20ms", "-log-format", "text", "-http-addr", "127.0.0.1:0", "-progress", "200ms"}
	out, status, _ := startProgram(ctx, t, db, name, brokers, args)
	listening := regexp.MustCompile(`msg="HTTP listener started" addr=(\S+)`)
	var addr string
	waitFor(t, time.Minute, "the HTTP listener", status, out, func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	call := func(want int, args ...string) string {
		t.Helper()
		code, stdout, stderr := backfillCLI(t, addr, args...)
		if code != want {
			t.Fatalf("kafkasink backfill %q: status %d (%s), want %d\n%s", args, code, stderr, want, stdout)
		}
		return stdout + stderr
	}
	list := func() []backfillDoc {
		t.Helper()
		var l []backfillDoc
		if err := json.Unmarshal([]byte(call(0, "list")), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}

	// A slow condition (a millisecond a row, a second a chunk) keeps the
	// backfill running while it is paused, resumed and cancelled.
	var slow backfillDoc
	waitFor(t, time.Minute, "the program to take a backfill request", status, out, func() bool {
		code, stdout, _ := backfillCLI(t, addr, "-table", "public."+name, "-where", "pg_sleep(0.001)::text = ''")
		return code == 0 && json.Unmarshal([]byte(stdout), &slow) == nil
	})
	if slow.Table != "public."+name || slow.By != "api" || slow.ID == "" {
		t.Fatalf("the requested backfill: %+v", slow)
	}
	call(0, "pause", slow.ID)
	if l := list(); len(l) != 1 || l[0].ID != slow.ID || !l[0].Paused {
		t.Errorf("list after pause: %+v, want the backfill paused", l)
	}
	progress := regexp.MustCompile(`msg="backfill progress" backfill=` + slow.ID + ` table=public.` + name + ` rows=\d+ chunks=\d+ last_key=\S+ rows_left=-?\d+ rows_per_second=\d+ paused=true`)
	waitFor(t, 30*time.Second, "the paused backfill in the progress log", status, out, func() bool { return progress.MatchString(out.String()) })
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Backfills []backfillDoc }
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || len(doc.Backfills) != 1 || doc.Backfills[0].ID != slow.ID || !doc.Backfills[0].Paused || doc.Backfills[0].RowsLeft > 3000 {
		t.Errorf("/status backfills: %+v (%v), want the paused backfill", doc.Backfills, err)
	}
	call(0, "resume", slow.ID)
	if l := list(); len(l) != 1 || l[0].Paused {
		t.Errorf("list after resume: %+v, want the backfill running", l)
	}
	call(0, "cancel", slow.ID)
	if l := list(); len(l) != 0 {
		t.Errorf("list after cancel: %+v, want none", l)
	}

	var eu backfillDoc
	if err := json.Unmarshal([]byte(call(0, "-table", "public."+name, "-where", "id <= 40")), &eu); err != nil {
		t.Fatal(err)
	}
	topic := name + ".public." + name
	waitFor(t, time.Minute, "the 40 rows of the backfill with a condition", status, out, func() bool { return readsBy(t, brokers, topic)[eu.ID] >= 40 })

	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{1, []string{"cancel", "nosuch"}, "404 Not Found: pgcdc: no such backfill"},
		{1, []string{"-table", "public.nosuch_" + name}, "400 Bad Request: pgcdc: backfill of public.nosuch_" + name + ": no such table"},
		{2, nil, "name the table to backfill with -table"},
		{2, []string{"pause"}, "pause takes one backfill ID"},
		{2, []string{"list", "-table", "t"}, "-table and -where ask for a new backfill"},
	} {
		if got := call(c.code, c.args...); !strings.Contains(got, c.want) {
			t.Errorf("kafkasink backfill %q: %q, want it to say %q", c.args, got, c.want)
		}
	}
	form, err := http.Post("http://"+addr+"/backfills", "application/x-www-form-urlencoded", strings.NewReader(`{"table":"public.`+name+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	form.Body.Close()
	if form.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a POST of a form: %s, want 415", form.Status)
	}

	// A table added to the publication: its rows arrive as a backfill.
	for _, sql := range []string{
		"CREATE TABLE " + added + " (id int PRIMARY KEY, note text)",
		"INSERT INTO " + added + " SELECT g, 'added ' || g FROM generate_series(1, 25) g",
		"ALTER PUBLICATION " + name + " ADD TABLE " + added,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() { db.Exec(context.Background(), "DROP TABLE IF EXISTS "+added) })
	var reads map[string]int
	waitFor(t, time.Minute, "the added table's rows", status, out, func() bool {
		reads = readsBy(t, brokers, name+".public."+added)
		return sum(reads) >= 25
	})
	if sum(reads) != 25 {
		t.Errorf("the added table's read records: %v, want 25 of one backfill", reads)
	}
	if !strings.Contains(out.String(), `msg="a table joined the publication: its changes are streamed" slot=`+name+` table=public.`+added) {
		t.Errorf("no log that %s joined the publication:\n%s", added, out.String())
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// The progress line names each backfill's table, rows, the rows left when
// known, and its rate or its pause.
func TestBackfillsLine(t *testing.T) {
	running := pgcdc.BackfillProgress{BackfillStatus: pgcdc.BackfillStatus{Table: "public.orders", Rows: 2048}, RowsLeft: 900, RowsPerSecond: 511.6}
	paused := pgcdc.BackfillProgress{BackfillStatus: pgcdc.BackfillStatus{Table: "public.items", Paused: true}, RowsLeft: -1}
	for _, c := range []struct {
		ps   []pgcdc.BackfillProgress
		want string
	}{
		{nil, ""},
		{[]pgcdc.BackfillProgress{running, paused}, "; backfill public.orders 2048 rows (~900 left) 512/s; backfill public.items 0 rows paused"},
	} {
		if got := backfillsLine(c.ps); got != c.want {
			t.Errorf("backfillsLine(%+v) = %q, want %q", c.ps, got, c.want)
		}
	}
}
