// Package murmur2 is the hash Kafka's Java producer partitions keyed
// records by.
package murmur2

// Hash is the 32-bit MurmurHash2 variant of Kafka's Java client
// (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c, the input
// read as little-endian 32-bit words. Producers in any language that use it
// put equal keys in equal partitions, which is what keeps a row's changes
// in order across producers.
func Hash(b []byte) int32 {
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
