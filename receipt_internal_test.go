package kafkasink

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReceiptDefinition checks Receipt's definition on a plan made by
// hand: per topic, in input order across parts, only values counted, a
// null value and an empty one contributing nothing. Topic "a"'s values
// are "123456789" in pieces, so its CRC32C must be that string's, the
// CRC catalogue's check value for CRC-32C: 0xE3069283.
func TestReceiptDefinition(t *testing.T) {
	pos := func(i uint64) Position { return Position{LSN: 7, Index: i} }
	rec := func(topic string, value []byte) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("key"), Value: value,
			Headers: []kgo.RecordHeader{{Key: HeaderID, Value: []byte("header")}}}
	}
	p := &plan{parts: []part{
		{
			records:   []*kgo.Record{rec("a", []byte("1234")), rec("b", []byte("xyz")), rec("a", nil)},
			positions: []Position{pos(1), pos(1), pos(2)},
		},
		{
			records:   []*kgo.Record{rec("a", []byte{}), rec("b", nil), rec("a", []byte("56789"))},
			positions: []Position{pos(3), pos(4), pos(5)},
		},
	}}
	got := p.receipts()
	want := []Receipt{
		{Topic: "a", First: pos(1), Last: pos(5), Records: 4, Bytes: 9, CRC32C: 0xE3069283},
		// CRC-32C of "xyz", by the reference bitwise algorithm (see
		// bitwiseCRC32C), not by hash/crc32.
		{Topic: "b", First: pos(1), Last: pos(4), Records: 2, Bytes: 3, CRC32C: bitwiseCRC32C([]byte("xyz"))},
	}
	if len(got) != len(want) {
		t.Fatalf("%d receipts %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("receipt %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	// Input order matters: the same values in another order make
	// another CRC.
	p.parts[0].records[0], p.parts[1].records[2] = p.parts[1].records[2], p.parts[0].records[0]
	if again := p.receipts(); again[0].CRC32C == want[0].CRC32C {
		t.Errorf("the values of topic a reordered gave the same CRC32C %08x", again[0].CRC32C)
	}

	if got := (&plan{}).receipts(); len(got) != 0 {
		t.Errorf("a plan without records has receipts %+v", got)
	}
}

// bitwiseCRC32C is the CRC-32C of b computed bit by bit from the reflected
// Castagnoli polynomial 0x82F63B78, initial and final value 0xFFFFFFFF:
// the reference the test checks hash/crc32's table against.
func bitwiseCRC32C(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}
