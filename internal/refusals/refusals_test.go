package refusals

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// layout sends every record to its own Partition field, with one limit
// for every topic, each record counting its value's length.
type layout struct{ limit int }

func (layout) Partition(r *kgo.Record) int32 { return r.Partition }
func (l layout) Limit(string) int            { return l.limit }
func (layout) Size(r *kgo.Record) int        { return len(r.Value) }

func records(n int, partition int32) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: "t", Partition: partition, Value: make([]byte, 10)}
	}
	return rs
}

// TestRounds: each partition's records, in order, in runs within the
// limit (a record over it alone), one run per partition a round.
func TestRounds(t *testing.T) {
	t.Parallel()
	a, b := records(5, 0), records(2, 1)
	big := &kgo.Record{Topic: "t", Partition: 0, Value: make([]byte, 50)}
	a = append(a, big)
	q := NewQueues(slices.Concat(a[:1], b, a[1:]), layout{limit: 25})
	want := [][][]*kgo.Record{{a[:2], b}, {a[2:4]}, {a[4:5]}, {{big}}}
	for i, w := range want {
		got := q.Round()
		if len(got) != len(w) {
			t.Fatalf("round %d: %d runs, want %d", i, len(got), len(w))
		}
		for j := range w {
			if !slices.Equal(got[j], w[j]) {
				t.Errorf("round %d run %d: %d records, want %d", i, j, len(got[j]), len(w[j]))
			}
		}
	}
	if got := q.Round(); len(got) != 0 {
		t.Errorf("after the last run: %d runs, want none", len(got))
	}
}

// TestProbeBisects: a run that holds refused records fails as a whole
// (one batch); Probe splits it until each refused record failed alone,
// and finds exactly those.
func TestProbeBisects(t *testing.T) {
	t.Parallel()
	rs := records(10, 0)
	refused := map[*kgo.Record]bool{rs[3]: true, rs[7]: true}
	q := NewQueues(rs, layout{limit: 1000})
	got, sent, rounds, err := q.Probe(func(round [][]*kgo.Record) (map[*kgo.Record]error, error) {
		failed := make(map[*kgo.Record]error)
		for _, run := range round {
			if slices.ContainsFunc(run, func(r *kgo.Record) bool { return refused[r] }) {
				for _, r := range run {
					failed[r] = kerr.InvalidRecord
				}
			}
		}
		return failed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Collect(maps.Keys(got)); len(keys) != 2 || !refused[keys[0]] || !refused[keys[1]] {
		t.Errorf("refused %d records, want records 3 and 7", len(keys))
	}
	if sent <= len(rs) || rounds < 2 {
		t.Errorf("sent %d in %d rounds, want the failed ones sent again", sent, rounds)
	}

	// A round that fails otherwise ends the probe with its error.
	boom := errors.New("boom")
	_, _, _, err = NewQueues(rs, layout{limit: 1000}).Probe(func([][]*kgo.Record) (map[*kgo.Record]error, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("Probe: %v, want the round's error", err)
	}
}

// TestCode: the codes a record can earn alone, wrapped or not; others
// are no refusal.
func TestCode(t *testing.T) {
	t.Parallel()
	if c := Code(errors.Join(errors.New("x"), kerr.PolicyViolation)); c != kerr.PolicyViolation {
		t.Errorf("Code = %v, want POLICY_VIOLATION", c)
	}
	if c := Code(kerr.NotLeaderForPartition); c != nil {
		t.Errorf("Code(NOT_LEADER) = %v, want nil", c)
	}
	if !TooLarge(kerr.MessageTooLarge) || TooLarge(kerr.InvalidRecord) {
		t.Error("TooLarge: want MESSAGE_TOO_LARGE only among these")
	}
}
