package kafkasinktest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// record is what the reader returns for event e at offset, keyed by its id
// column.
func record(e kafkasink.Event, partition int32, offset int64) kafkasinktest.Record {
	return kafkasinktest.Record{Topic: ordersTopic, Partition: partition, Offset: offset, Key: keyOf(e),
		Op: e.Op, Position: e.Position, Encoding: kafkasinktest.EventJSON}
}

func keyOf(e kafkasink.Event) string {
	row := e.After
	if row == nil {
		row = e.Before
	}
	return fmt.Sprintf(`{"id":%d}`, row[0].Value)
}

// Each assertion fails on a bad input, and says what is wrong with the
// positions involved.
func TestAssertExactlyOnceFails(t *testing.T) {
	t.Parallel()
	want := orders(0x500, 1, 4) // ids 1-4, positions 0/500:0 .. 0/500:3
	good := []kafkasinktest.Record{record(want[0], 0, 0), record(want[1], 1, 0), record(want[2], 0, 1), record(want[3], 1, 1)}
	other := orders(0x600, 9, 1)[0]
	sameKey := want[1]
	sameKey.After = want[0].After // a second change of id 1

	cases := []struct {
		name string
		got  []kafkasinktest.Record
		want []kafkasink.Event
		says []string
	}{
		{"missing", good[:3], want, []string{"1 missing", "missing      0/500:3 insert of public.orders"}},
		{"duplicated", append(append([]kafkasinktest.Record(nil), good...), record(want[2], 0, 7)), want,
			[]string{"1 duplicated", "duplicated   0/500:2: 2 records, at " + ordersTopic + "[0]@1, " + ordersTopic + "[0]@7"}},
		{"unexpected", append(append([]kafkasinktest.Record(nil), good...), record(other, 2, 0)), want,
			[]string{"1 unexpected", "unexpected   0/600:0 insert at " + ordersTopic + "[2]@0"}},
		{"another op", func() []kafkasinktest.Record {
			g := append([]kafkasinktest.Record(nil), good...)
			g[1].Op = kafkasink.OpUpdate
			return g
		}(), want, []string{"1 with another op", "0/500:1 is update at " + ordersTopic + "[1]@0, want insert"}},
		{"out of order", []kafkasinktest.Record{record(sameKey, 0, 0), record(want[0], 0, 1)}, []kafkasink.Event{want[0], sameKey},
			[]string{"1 out of order", `out of order key {"id":1} of ` + ordersTopic + ": 0/500:0 at " + ordersTopic + "[0]@1 after 0/500:1 at " + ordersTopic + "[0]@0"}},
	}
	for _, tc := range cases {
		rec := &recordingTB{TB: t}
		if kafkasinktest.AssertExactlyOnce(rec, tc.got, tc.want) {
			t.Errorf("%s: AssertExactlyOnce passed", tc.name)
			continue
		}
		report := rec.report()
		t.Logf("%s:\n%s", tc.name, report)
		for _, s := range tc.says {
			if !strings.Contains(report, s) {
				t.Errorf("%s: the report does not say %q:\n%s", tc.name, s, report)
			}
		}
		if rec.fatal {
			t.Errorf("%s: AssertExactlyOnce stopped the test; it should only report", tc.name)
		}
	}

	// And it passes on a good input, the Debezium tombstone after a
	// delete included.
	del := want[3]
	del.Op, del.Before, del.After = kafkasink.OpDelete, del.After, nil
	tomb := record(del, 1, 2)
	tomb.Encoding = kafkasinktest.Tombstone
	rec := &recordingTB{TB: t}
	if !kafkasinktest.AssertExactlyOnce(rec, append(good[:3:3], record(del, 1, 1), tomb), append(want[:3:3], del)) {
		t.Errorf("AssertExactlyOnce failed on a good input: %s", rec.report())
	}
}

func TestAssertEventsFails(t *testing.T) {
	t.Parallel()
	want := orders(0x500, 1, 3)
	for name, got := range map[string][]kafkasink.Event{
		"missing":      want[:2],
		"duplicated":   append(append([]kafkasink.Event(nil), want...), want[2]),
		"out of order": {want[1], want[0], want[2]},
	} {
		rec := &recordingTB{TB: t}
		if kafkasinktest.AssertEvents(rec, got, want) {
			t.Errorf("%s: AssertEvents passed", name)
			continue
		}
		if report := rec.report(); !strings.Contains(report, "1 "+name) || !strings.Contains(report, "0/500:") {
			t.Errorf("%s: the report does not say 1 %s with positions:\n%s", name, name, report)
		}
	}
	if rec := (&recordingTB{TB: t}); !kafkasinktest.AssertEvents(rec, want, want) {
		t.Errorf("AssertEvents failed on a good input: %s", rec.report())
	}
}

func TestAssertCheckpointFails(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "assert-checkpoint")
	a := orders(0x500, 1, 3)
	writeAgain(t, s, a)

	for name, tc := range map[string]struct {
		cfg  kafkasink.Config
		want kafkasink.Position
		says string
	}{
		"behind":   {cfg, kafkasink.Position{LSN: 0x600}, "checkpoint of sink \"assert-checkpoint\" is 0/500:2 (" + kafkasink.DefaultCheckpointTopic + "[0]@"},
		"ahead":    {cfg, kafkasink.Position{LSN: 0x400}, "ahead of the wanted 0/400:0"},
		"no sink":  {kafkasink.Config{Brokers: cfg.Brokers, SinkID: "nobody"}, a[2].Position, `checkpoint of sink "nobody": no committed record`},
		"no topic": {kafkasink.Config{Brokers: cfg.Brokers, SinkID: "assert-checkpoint", CheckpointTopic: "elsewhere"}, a[2].Position, "no committed record in elsewhere"},
	} {
		rec := &recordingTB{TB: t}
		if kafkasinktest.AssertCheckpoint(rec, tc.cfg, tc.want) {
			t.Errorf("%s: AssertCheckpoint passed", name)
			continue
		}
		if report := rec.report(); !strings.Contains(report, tc.says) {
			t.Errorf("%s: the report does not say %q:\n%s", name, tc.says, report)
		}
	}
	if rec := (&recordingTB{TB: t}); !kafkasinktest.AssertCheckpoint(rec, cfg, a[2].Position) {
		t.Errorf("AssertCheckpoint failed on the right position: %s", rec.report())
	}
}
