package partitioner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionerMatchesKgo checks New against franz-go's own
// Kafka-compatible keyed partitioner, an implementation this package did
// not write.
func TestPartitionerMatchesKgo(t *testing.T) {
	t.Parallel()
	ours := New().ForTopic("t")
	theirs := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	if !ours.RequiresConsistency(&kgo.Record{Key: []byte("k")}) {
		t.Error("the sink's partitioner must be consistent")
	}
	for i := range 2000 {
		key := []byte(fmt.Sprintf("key-%d-%s", i, strings.Repeat("x", i%7)))
		for _, n := range []int{1, 3, 12, 64} {
			r := &kgo.Record{Key: key}
			if a, b := ours.Partition(r, n), theirs.Partition(r, n); a != b {
				t.Fatalf("key %q, %d partitions: ours %d, kgo %d", key, n, a, b)
			}
		}
	}
}

// TestNullKey: a record with a null key goes to partition 0; one with an
// empty key is hashed, as For hashes it.
func TestNullKey(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 7, 64} {
		if p := Record(&kgo.Record{}, n); p != 0 {
			t.Errorf("a null key among %d partitions: %d, want 0", n, p)
		}
		if p, want := Record(&kgo.Record{Key: []byte{}}, n), For(nil, n); p != want {
			t.Errorf("an empty key among %d partitions: %d, want For's %d", n, p, want)
		}
	}
	if p := For([]byte("k"), 0); p != -1 {
		t.Errorf("For with no partitions = %d, want -1", p)
	}
}
