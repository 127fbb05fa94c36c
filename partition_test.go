package kafkasink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafkasink/kafkasink/internal/murmur2"
)

// murmur2Vectors is the content of testdata/murmur2.json.
type murmur2Vectors struct {
	Source  string `json:"source"`
	Vectors []struct {
		Key        string         `json:"key"`
		Murmur2    int32          `json:"murmur2"`
		Positive   int32          `json:"positive"`
		Partitions map[string]int `json:"partitions"`
	} `json:"vectors"`
}

func TestMurmur2Vectors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "murmur2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v murmur2Vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 6 {
		t.Fatalf("only %d vectors in testdata/murmur2.json", len(v.Vectors))
	}
	for _, vec := range v.Vectors {
		if got := murmur2.Hash([]byte(vec.Key)); got != vec.Murmur2 {
			t.Errorf("murmur2.Hash(%q) = %d, want %d", vec.Key, got, vec.Murmur2)
		}
		if got := murmur2.Hash([]byte(vec.Key)) & 0x7fffffff; got != vec.Positive {
			t.Errorf("murmur2.Hash(%q) & 0x7fffffff = %d, want %d", vec.Key, got, vec.Positive)
		}
		if len(vec.Partitions) == 0 {
			t.Errorf("%q: no partition expectations", vec.Key)
		}
		for n, want := range vec.Partitions {
			var parts int
			fmt.Sscan(n, &parts)
			if got := PartitionFor([]byte(vec.Key), parts); got != want {
				t.Errorf("PartitionFor(%q, %d) = %d, want %d", vec.Key, parts, got, want)
			}
		}
	}
}

func TestPartitionFor(t *testing.T) {
	t.Parallel()
	// Kafka masks the sign bit rather than taking an absolute value:
	// murmur2("21") = -973932308, & 0x7fffffff = 1173551340.
	if got, want := PartitionFor([]byte("21"), 1000), 1173551340%1000; got != want {
		t.Errorf("PartitionFor(21, 1000) = %d, want %d", got, want)
	}
	if got := PartitionFor(nil, 7); got != PartitionFor([]byte{}, 7) {
		t.Errorf("nil key %d differs from empty key", got)
	}
	for _, n := range []int{0, -1} {
		if got := PartitionFor([]byte("x"), n); got != -1 {
			t.Errorf("PartitionFor(x, %d) = %d, want -1", n, got)
		}
	}
	// Every tail length (0-3 bytes past a 4-byte word) must stay in range.
	for l := range 12 {
		key := bytes.Repeat([]byte{0xff}, l)
		if p := PartitionFor(key, 5); p < 0 || p >= 5 {
			t.Errorf("PartitionFor(%x, 5) = %d out of range", key, p)
		}
	}
}
