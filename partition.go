package kafkasink

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/murmur2"
)

// PartitionFor returns the partition Kafka's Java producer chooses for a
// record with this key among partitions partitions:
// (murmur2(key) & 0x7fffffff) % partitions, as its DefaultPartitioner and
// BuiltInPartitioner compute for keyed records. A nil key is hashed like
// an empty one, though the sink itself writes records with a null key to
// partition 0 (see Event.Keyless). It returns -1 when partitions is not
// positive, which no producer accepts as a partition.
// It is safe for concurrent use.
func PartitionFor(key []byte, partitions int) int {
	if partitions <= 0 {
		return -1
	}
	return int(murmur2.Hash(key)&0x7fffffff) % partitions
}

// newPartitioner returns the partitioner the sink gives kgo: every record
// goes to PartitionFor of its key, consistently, because a row's changes
// must stay in one partition. A record with a null key (an event of a
// table without a key, Event.Keyless) goes to partition 0: all of its
// table's changes stay in one partition, in commit order, and a record
// written again after a failure goes where it went before. (Java's
// producer spreads null-key records over partitions instead.)
func newPartitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return partitionRecord
	})
}

func partitionRecord(r *kgo.Record, n int) int {
	if r.Key == nil {
		return 0
	}
	return PartitionFor(r.Key, n)
}
