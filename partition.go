package kafkasink

import "github.com/kafkasink/kafkasink/internal/partitioner"

// PartitionFor returns the partition Kafka's Java producer chooses for a
// record with this key among partitions partitions:
// (murmur2(key) & 0x7fffffff) % partitions, as its DefaultPartitioner and
// BuiltInPartitioner compute for keyed records. A nil key is hashed like
// an empty one, though the sink itself writes records with a null key to
// partition 0 (see Event.Keyless). It returns -1 when partitions is not
// positive, which no producer accepts as a partition.
// It is safe for concurrent use.
func PartitionFor(key []byte, partitions int) int {
	return partitioner.For(key, partitions)
}
