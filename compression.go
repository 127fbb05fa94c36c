package kafkasink

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ParseCompression returns the batch compression codec a configuration
// names: none, snappy (franz-go's default, and so the sink's), lz4, zstd
// or gzip. Give it to the sink with kgo.ProducerBatchCompression in
// Config.ClientOptions.
func ParseCompression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("kafkasink: unknown compression %q: want none, snappy, lz4, zstd or gzip", name)
}
