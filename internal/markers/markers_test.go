package markers

import (
	"slices"
	"testing"
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
