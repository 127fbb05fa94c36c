package txndurations

import (
	"testing"
	"time"
)

// TestBuckets: a duration on a bound counts in that bound's bucket, one
// just above it in the next, and one above every bound in the last.
func TestBuckets(t *testing.T) {
	var h Histogram
	h.Observe(0)
	h.Observe(time.Millisecond)
	h.Observe(time.Millisecond + 1)
	h.Observe(time.Hour)
	bs, counts, count, sum := h.Snapshot()
	if len(bs) != len(bounds) || len(counts) != len(bounds)+1 {
		t.Fatalf("%d bounds and %d counts, want %d and %d", len(bs), len(counts), len(bounds), len(bounds)+1)
	}
	want := map[int]int64{0: 2, 1: 1, len(bounds): 1}
	for i, n := range counts {
		if n != want[i] {
			t.Errorf("bucket %d counts %d, want %d", i, n, want[i])
		}
	}
	if count != 4 || sum != 2*time.Millisecond+1+time.Hour {
		t.Errorf("count %d, sum %v", count, sum)
	}
	bs[0] = 0 // the caller's copy
	if bounds[0] != time.Millisecond {
		t.Error("Snapshot returned the bounds themselves, not a copy")
	}
}
