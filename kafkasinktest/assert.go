package kafkasinktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// The assertions report every problem in one readable error, each with
// the positions involved, and return whether they passed; they never stop
// the test (call t.FailNow after a false result to stop it).

// maxListed is how many problems of one kind an assertion lists.
const maxListed = 20

// AssertExactlyOnce checks that got, records of the sink's topics (as
// ReadCommitted returns them), holds every event of want exactly once and
// nothing else, with the event's op, and that the records of each key of a
// topic are in the order of their positions. The tombstone the
// debezium.Encoder writes after a delete is that delete's, not a duplicate;
// an event the encoder does not write (the debezium.Encoder's truncates, by
// default) must be left out of want.
//
// On failure it reports, with positions and where each record is, the
// events missing, those seen more than once, those with another op,
// records of no event of want, and records out of order for their key.
func AssertExactlyOnce(t testing.TB, got []Record, want []kafkasink.Event) bool {
	t.Helper()
	seen := make([]sighting, len(got))
	for i, r := range got {
		seen[i] = sighting{
			pos: r.Position, op: r.Op, tombstone: r.Encoding == Tombstone,
			orderKey: r.Topic + "\x00" + r.Key, orderName: fmt.Sprintf("key %s of %s", r.Key, r.Topic),
			where: fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset),
		}
	}
	return report(t, "exactly once", diff(seen, want))
}

// AssertEvents checks that got, the events a sink received (such as
// Recorder.Events), holds every event of want exactly once and nothing
// else, in the order of their positions. On failure it reports what
// AssertExactlyOnce reports, with each event's index in got.
func AssertEvents(t testing.TB, got, want []kafkasink.Event) bool {
	t.Helper()
	seen := make([]sighting, len(got))
	for i := range got {
		seen[i] = sighting{pos: got[i].Position, op: got[i].Op, orderName: "the events", where: fmt.Sprintf("event #%d", i)}
	}
	return report(t, "events", diff(seen, want))
}

// AssertCheckpoint checks that the checkpoint a sink with cfg stored in
// Kafka, as a read_committed consumer of cfg.CheckpointTopic sees it (the
// last record keyed cfg.SinkID), is at want. It reads from cfg.Brokers
// and does not disturb a running sink. On failure it reports the stored
// position and where it is, or that there is none.
func AssertCheckpoint(t testing.TB, cfg kafkasink.Config, want kafkasink.Position) bool {
	t.Helper()
	topic := cfg.CheckpointTopic
	if topic == "" {
		topic = kafkasink.DefaultCheckpointTopic
	}
	raw, err := FetchCommitted(context.Background(), cfg.Brokers, topic)
	if err != nil {
		t.Errorf("kafkasinktest: checkpoint of sink %q: %v", cfg.SinkID, err)
		return false
	}
	var last string
	where := ""
	for _, r := range raw {
		if string(r.Key) != cfg.SinkID {
			continue
		}
		var v struct {
			Position string `json:"position"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Errorf("kafkasinktest: checkpoint of sink %q: record %s[%d]@%d: %v", cfg.SinkID, r.Topic, r.Partition, r.Offset, err)
			return false
		}
		last, where = v.Position, fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset)
	}
	if last == "" {
		t.Errorf("kafkasinktest: checkpoint of sink %q: no committed record in %s, want %s (did a Write succeed? is Config.SinkID right?)", cfg.SinkID, topic, want)
		return false
	}
	pos, err := kafkasink.ParsePosition(last)
	if err != nil {
		t.Errorf("kafkasinktest: checkpoint of sink %q at %s: %v", cfg.SinkID, where, err)
		return false
	}
	if pos != want {
		rel := "behind"
		if pos.Compare(want) > 0 {
			rel = "ahead of"
		}
		t.Errorf("kafkasinktest: checkpoint of sink %q is %s (%s), %s the wanted %s", cfg.SinkID, pos, where, rel, want)
		return false
	}
	return true
}

// sighting is one delivery of an event: a record, or an event a sink
// received.
type sighting struct {
	pos       kafkasink.Position
	op        kafkasink.Op
	tombstone bool
	orderKey  string // sightings with the same key must be in position order
	orderName string // the key, for people
	where     string
}

// problems are what diff found, by kind.
type problems struct {
	missing, duplicated, wrongOp, unexpected, outOfOrder []string
}

func (p *problems) count() int {
	return len(p.missing) + len(p.duplicated) + len(p.wrongOp) + len(p.unexpected) + len(p.outOfOrder)
}

// diff compares what was seen with want.
func diff(seen []sighting, want []kafkasink.Event) problems {
	var p problems
	wanted := make(map[kafkasink.Position]*kafkasink.Event, len(want))
	for i := range want {
		wanted[want[i].Position] = &want[i]
	}
	type seenKey struct {
		pos       kafkasink.Position
		tombstone bool
	}
	where := make(map[seenKey][]string)
	present := make(map[kafkasink.Position]bool)
	for _, s := range seen {
		e, ok := wanted[s.pos]
		if !ok {
			p.unexpected = append(p.unexpected, fmt.Sprintf("%s %s at %s", s.pos, s.op, s.where))
			continue
		}
		if s.op != e.Op {
			p.wrongOp = append(p.wrongOp, fmt.Sprintf("%s is %s at %s, want %s", s.pos, s.op, s.where, e.Op))
		}
		k := seenKey{s.pos, s.tombstone}
		where[k] = append(where[k], s.where)
		present[s.pos] = true
	}
	for i := range want {
		if e := &want[i]; !present[e.Position] {
			p.missing = append(p.missing, fmt.Sprintf("%s %s of %s", e.Position, e.Op, kafkasink.TableName(e.Schema, e.Table)))
		}
	}
	var dups []seenKey
	for k, w := range where {
		if len(w) > 1 {
			dups = append(dups, k)
		}
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].pos.Compare(dups[j].pos) < 0 })
	for _, k := range dups {
		what := "records"
		if k.tombstone {
			what = "tombstones"
		}
		p.duplicated = append(p.duplicated, fmt.Sprintf("%s: %d %s, at %s", k.pos, len(where[k]), what, strings.Join(where[k], ", ")))
	}
	last := make(map[string]sighting)
	for _, s := range seen {
		prev, ok := last[s.orderKey]
		last[s.orderKey] = s
		// The same position again is a duplicate, reported as such,
		// or the tombstone after its own delete.
		if !ok || s.pos.Compare(prev.pos) >= 0 {
			continue
		}
		p.outOfOrder = append(p.outOfOrder, fmt.Sprintf("%s: %s at %s after %s at %s", s.orderName, s.pos, s.where, prev.pos, prev.where))
	}
	return p
}

// report fails t with every problem of p, listed by kind, and returns
// whether there were none.
func report(t testing.TB, what string, p problems) bool {
	t.Helper()
	if p.count() == 0 {
		return true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kafkasinktest: %s: %d missing, %d duplicated, %d with another op, %d unexpected, %d out of order",
		what, len(p.missing), len(p.duplicated), len(p.wrongOp), len(p.unexpected), len(p.outOfOrder))
	for _, kind := range []struct {
		name  string
		lines []string
	}{
		{"missing", p.missing}, {"duplicated", p.duplicated}, {"another op", p.wrongOp},
		{"unexpected", p.unexpected}, {"out of order", p.outOfOrder},
	} {
		for i, line := range kind.lines {
			if i == maxListed {
				fmt.Fprintf(&b, "\n  %-12s ... and %d more", kind.name, len(kind.lines)-maxListed)
				break
			}
			fmt.Fprintf(&b, "\n  %-12s %s", kind.name, line)
		}
	}
	t.Errorf("%s", b.String())
	return false
}
