package pgoutputmsg

import (
	"bytes"
	"testing"
	"time"
)

// TestLayout pins a few messages to bytes written out by hand from
// PostgreSQL's "Logical Replication Message Formats", so that a builder
// and the decoder cannot agree on a mistake.
func TestLayout(t *testing.T) {
	t.Parallel()
	oneSecond := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		got, want []byte
	}{
		{"begin", Begin(0x10, oneSecond, 7), []byte{'B',
			0, 0, 0, 0, 0, 0, 0, 0x10, // final LSN
			0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, // 1,000,000 µs since 2000-01-01
			0, 0, 0, 7}}, // xid
		{"relation", Relation(0, 16384, "s", "t", 'd', Key("id", 23), Col("v", 25)), []byte{'R',
			0, 0, 0x40, 0, 's', 0, 't', 0, 'd', 0, 2,
			1, 'i', 'd', 0, 0, 0, 0, 23, 0xff, 0xff, 0xff, 0xff,
			0, 'v', 0, 0, 0, 0, 25, 0xff, 0xff, 0xff, 0xff}},
		{"insert", Insert(0, 5, Text("ab"), Null(), Toast(), Binary([]byte{1})), []byte{'I',
			0, 0, 0, 5, 'N', 0, 4,
			't', 0, 0, 0, 2, 'a', 'b', 'n', 'u', 'b', 0, 0, 0, 1, 1}},
		{"insert in a stream block", Insert(9, 5, Null()), []byte{'I', 0, 0, 0, 9, 0, 0, 0, 5, 'N', 0, 1, 'n'}},
		{"logical", Logical(0, true, 3, "p", "c"), []byte{'M', 1, 0, 0, 0, 0, 0, 0, 0, 3, 'p', 0, 0, 0, 0, 1, 'c'}},
		{"stream abort", StreamAbort(5, 6), []byte{'A', 0, 0, 0, 5, 0, 0, 0, 6}},
		{"zero encoder", new(Encoder).Uint16(0x102).CString("").Bytes(), []byte{1, 2, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Errorf("got  % x\nwant % x", tt.got, tt.want)
			}
		})
	}
}
