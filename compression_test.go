package kafkasink_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

func TestParseCompression(t *testing.T) {
	for name, want := range map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(),
		"zstd": kgo.ZstdCompression(), "gzip": kgo.GzipCompression(),
	} {
		if got, err := kafkasink.ParseCompression(name); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"", "brotli", "Snappy"} {
		if _, err := kafkasink.ParseCompression(name); err == nil || !strings.Contains(err.Error(), "want none, snappy, lz4, zstd or gzip") {
			t.Errorf("ParseCompression(%q): %v, want a refusal listing the names", name, err)
		}
	}
}
