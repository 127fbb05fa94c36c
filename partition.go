package kafkasink

import "github.com/twmb/franz-go/pkg/kgo"

// murmur2 is the 32-bit MurmurHash2 variant of Kafka's Java client
// (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c, the input
// read as little-endian 32-bit words. Producers in any language that use it
// put equal keys in equal partitions, which is what keeps a row's changes
// in order across producers.
func murmur2(b []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(b)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := b[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

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
	return int(murmur2(key)&0x7fffffff) % partitions
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
