// Package partitioner is where the sink's records go: the partition
// Kafka's Java producer chooses for a keyed record, and partition 0 for a
// record with a null key.
package partitioner

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/murmur2"
)

// For returns (murmur2(key) & 0x7fffffff) % partitions, as the Java
// producer's DefaultPartitioner and BuiltInPartitioner compute for keyed
// records, or -1 when partitions is not positive (kafkasink.PartitionFor).
func For(key []byte, partitions int) int {
	if partitions <= 0 {
		return -1
	}
	return int(murmur2.Hash(key)&0x7fffffff) % partitions
}

// New returns the partitioner the sink gives kgo: every record goes to
// For of its key, consistently, because a row's changes must stay in one
// partition. A record with a null key (an event of a table without a
// key, Event.Keyless) goes to partition 0: all of its table's changes stay
// in one partition, in commit order, and a record written again after a
// failure goes where it went before. (Java's producer spreads null-key
// records over partitions instead.)
func New() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return Record
	})
}

// Record returns the partition of r among n, as New's partitioner
// chooses it.
func Record(r *kgo.Record, n int) int {
	if r.Key == nil {
		return 0
	}
	return For(r.Key, n)
}
