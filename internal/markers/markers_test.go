package markers

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSettled: a span is settled once its partition's last stable offset
// is past its last record; an unknown partition, or one whose offset is
// at its last record, keeps it pending.
func TestSettled(t *testing.T) {
	t.Parallel()
	a := Span{Partition: Partition{"t", 0}, First: 3, Last: 5}
	b := Span{Partition: Partition{"t", 1}, First: 3, Last: 5}
	c := Span{Partition: Partition{"u", 0}, First: 3, Last: 5}
	done, open := settled([]Span{a, b, c}, map[Partition]int64{{"t", 0}: 6, {"t", 1}: 5})
	if !slices.Equal(done, []Span{a}) || !slices.Equal(open, []Span{b, c}) {
		t.Errorf("settled: done %v, open %v; want [%v], [%v %v]", done, open, a, b, c)
	}
}

// TestWatchAborted: the topics of aborted transactions are kept once
// each, in order, until AbortsChecked.
func TestWatchAborted(t *testing.T) {
	t.Parallel()
	var w Watch[Span]
	w.Aborted([]string{"a", "b"})
	w.Aborted([]string{"b", "c"})
	if got := w.AbortedIn(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("AbortedIn = %v, want [a b c]", got)
	}
	w.AbortsChecked()
	if got := w.AbortedIn(); len(got) != 0 {
		t.Errorf("AbortedIn after AbortsChecked = %v, want none", got)
	}
}

// TestSpans: one span per partition in the order of its first record,
// from the lowest to the highest offset, whatever order the records are
// in, with the indexes of those records.
func TestSpans(t *testing.T) {
	t.Parallel()
	records := []*kgo.Record{
		{Topic: "a", Partition: 0, Offset: 5, ProducerID: 7},
		{Topic: "b", Partition: 1, Offset: 9, ProducerID: 7},
		{Topic: "a", Partition: 0, Offset: 3, ProducerID: 7},
		{Topic: "a", Partition: 1, Offset: 1, ProducerID: 7},
		{Topic: "a", Partition: 0, Offset: 8, ProducerID: 7},
	}
	spans, first, last := Spans(records)
	want := []Span{
		{Partition: Partition{"a", 0}, ProducerID: 7, First: 3, Last: 8},
		{Partition: Partition{"b", 1}, ProducerID: 7, First: 9, Last: 9},
		{Partition: Partition{"a", 1}, ProducerID: 7, First: 1, Last: 1},
	}
	if !slices.Equal(spans, want) || !slices.Equal(first, []int{2, 1, 3}) || !slices.Equal(last, []int{4, 1, 3}) {
		t.Errorf("Spans = %v, %v, %v; want %v, [2 1 3], [4 1 3]", spans, first, last, want)
	}
}

// TestHangingErrorText: the error names every hanging partition with the
// offset its records start at, and the producer id.
func TestHangingErrorText(t *testing.T) {
	err := HangingError{
		{Partition: Partition{Topic: "a", Partition: 1}, ProducerID: 42, First: 7, Last: 9},
		{Partition: Partition{Topic: "b", Partition: 0}, ProducerID: 42, First: 3, Last: 3},
	}
	got := err.Error()
	for _, want := range []string{"producer id 42 ", "abort markers to a[1] from offset 7, b[0] from offset 3 (", "kafka-transactions.sh"} {
		if !strings.Contains(got, want) {
			t.Errorf("HangingError: %q lacks %q", got, want)
		}
	}
}
