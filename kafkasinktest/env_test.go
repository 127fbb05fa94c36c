package kafkasinktest_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Env returns the variables' values in order where all are set, and
// otherwise skips, naming each unset one and no set one.
func TestEnv(t *testing.T) {
	t.Setenv("KAFKASINKTEST_ENV_A", "a")
	t.Setenv("KAFKASINKTEST_ENV_B", "b1,b2")
	t.Setenv("KAFKASINKTEST_ENV_UNSET1", "")
	t.Setenv("KAFKASINKTEST_ENV_UNSET2", "")
	if got := kafkasinktest.Env(t, "KAFKASINKTEST_ENV_B", "KAFKASINKTEST_ENV_A"); !reflect.DeepEqual(got, []string{"b1,b2", "a"}) {
		t.Errorf("Env = %q, want [b1,b2 a]", got)
	}
	if got := kafkasinktest.RealBrokers(t, "KAFKASINKTEST_ENV_B"); !reflect.DeepEqual(got, []string{"b1", "b2"}) {
		t.Errorf("RealBrokers = %q, want [b1 b2]", got)
	}
	for _, f := range map[string]func(testing.TB){
		"Env": func(tb testing.TB) {
			kafkasinktest.Env(tb, "KAFKASINKTEST_ENV_A", "KAFKASINKTEST_ENV_UNSET1", "KAFKASINKTEST_ENV_UNSET2")
		},
		"RealBrokers": func(tb testing.TB) { kafkasinktest.RealBrokers(tb, "KAFKASINKTEST_ENV_UNSET1") },
	} {
		rec := &recordingTB{TB: t}
		returned := false
		rec.run(func(tb testing.TB) { f(tb); returned = true })
		if returned || !strings.Contains(rec.skipped, "KAFKASINKTEST_ENV_UNSET1") || strings.Contains(rec.skipped, "KAFKASINKTEST_ENV_A") {
			t.Errorf("with a variable unset: returned %v, skipped with %q; want a skip naming the unset variables only", returned, rec.skipped)
		}
	}
}

// UniqueName differs between tests and between runs of one test, and
// is a valid topic name ending with the test's name.
func TestUniqueName(t *testing.T) {
	valid := regexp.MustCompile(`^t[0-9]+-[a-z0-9.-]+$`)
	names := map[string]bool{}
	for _, sub := range []string{"Orders_Paid", "orders-paid"} {
		t.Run(sub, func(t *testing.T) {
			first, second := kafkasinktest.UniqueName(t), kafkasinktest.UniqueName(t)
			if !valid.MatchString(first) || len(first) > 249 || !strings.HasSuffix(first, "-testuniquename-orders-paid") {
				t.Errorf("UniqueName = %q: want t<clock>-testuniquename-orders-paid, a valid topic name", first)
			}
			if first == second {
				t.Errorf("two calls returned %q", first)
			}
			names[first] = true
		})
	}
	if len(names) != 2 {
		t.Errorf("two tests got %d names", len(names))
	}
}

// DeleteTopics deletes the topics with the prefix and no other, and
// returns the error of a read it cannot make.
func TestDeleteTopics(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Topic("mine.a", 1), kafkasinktest.Topic("mine.b", 1), kafkasinktest.Topic("other.mine", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkasinktest.DeleteTopics(ctx, c.Brokers(), "mine."); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics.Names(); !reflect.DeepEqual(got, []string{"other.mine"}) {
		t.Errorf("after DeleteTopics(mine.) the topics are %q, want [other.mine]", got)
	}
	if err := kafkasinktest.DeleteTopics(ctx, c.Brokers(), "nothing."); err != nil {
		t.Errorf("no topic with the prefix: %v", err)
	}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if err := kafkasinktest.DeleteTopics(done, c.Brokers(), "other."); err == nil {
		t.Error("with its context done, DeleteTopics returned nil")
	}
}

// ReadCommittedRaw returns the records ReadCommitted decodes, as they
// are, and Header finds their headers.
func TestReadCommittedRaw(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "raw")
	events := changes()
	writeAgain(t, s, events)
	raw := kafkasinktest.ReadCommittedRaw(t, cfg.Brokers, ordersTopic)
	decoded := kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic)
	if len(raw) != len(events) || len(decoded) != len(raw) {
		t.Fatalf("%d raw records and %d decoded, want %d", len(raw), len(decoded), len(events))
	}
	// Partitions come in any order; within each, offsets in order.
	at := make(map[string]kafkasinktest.Record, len(decoded))
	for _, d := range decoded {
		at[fmt.Sprintf("%d@%d", d.Partition, d.Offset)] = d
	}
	for i, r := range raw {
		d := at[fmt.Sprintf("%d@%d", r.Partition, r.Offset)]
		id, op := kafkasinktest.Header(r, kafkasink.HeaderID), kafkasinktest.Header(r, kafkasink.HeaderOp)
		if r.Topic != d.Topic || r.Partition != d.Partition || r.Offset != d.Offset || id != d.Position.String() || op != d.Op.String() {
			t.Errorf("raw record %d %s[%d]@%d id %q op %q; decoded %v", i, r.Topic, r.Partition, r.Offset, id, op, d)
		}
		want, err := (kafkasink.JSONEncoder{}).Encode(nil, eventAt(events, d.Position))
		if err != nil || string(r.Value) != string(want) {
			t.Errorf("raw record %d: value %s, want the JSONEncoder's %s", i, r.Value, want)
		}
		if got := kafkasinktest.Header(r, "no.such.header"); got != "" {
			t.Errorf("Header of a key the record lacks = %q, want \"\"", got)
		}
	}
}

// eventAt returns the event of events at pos.
func eventAt(events []kafkasink.Event, pos kafkasink.Position) *kafkasink.Event {
	for i := range events {
		if events[i].Position == pos {
			return &events[i]
		}
	}
	return nil
}

// A LogBuffer takes what a sink's logger and other goroutines write at
// once (go test -race checks it) and keeps every line whole.
func TestLogBuffer(t *testing.T) {
	t.Parallel()
	var buf kafkasinktest.LogBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				log.Info("line", "g", g, "i", i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for _, l := range lines {
		if !strings.Contains(l, "msg=line g=") {
			t.Fatalf("line %q is not one whole log line", l)
		}
	}
}

// Inserts returns the events its doc describes, the same on each call.
func TestInserts(t *testing.T) {
	t.Parallel()
	got := kafkasinktest.Inserts("public", "orders", 0x500, 7, 3)
	if !reflect.DeepEqual(got, kafkasinktest.Inserts("public", "orders", 0x500, 7, 3)) {
		t.Error("two calls with the same arguments differ")
	}
	for i, e := range got {
		id := int64(7 + i)
		want := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders",
			Position: kafkasink.Position{LSN: 0x500, Index: uint64(i)}, LSN: kafkasink.LSN(0x500 - 3 + i), XID: 0x500,
			Commit: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Key: []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: id}, {Name: "name", Value: fmt.Sprintf("row-%d", id)}}}
		if !reflect.DeepEqual(e, want) {
			t.Errorf("event %d = %+v, want %+v", i, e, want)
		}
	}
	// They are a batch a sink takes.
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "inserts")
	writeAgain(t, s, got)
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, "kafkasink.public.orders"), got)
}
