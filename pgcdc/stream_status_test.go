package pgcdc

import (
	"bytes"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// standbyStatus encodes what pglogrepl.SendStandbyStatusUpdate sends for
// the same position and time: CopyData ('d', length 38), then 'r', the
// position three times, the time in microseconds since 2000-01-01, and no
// reply asked for.
func TestStandbyStatus(t *testing.T) {
	now := pgEpoch.Add(time.Second + 2*time.Microsecond)
	want := []byte{'d', 0, 0, 0, 38, 'r'}
	for range 3 {
		want = append(want, 0, 0, 0, 1, 0, 0, 0, 2)
	}
	want = append(want, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x42, 0)
	if got := standbyStatus(kafkasink.LSN(1<<32|2), now); !bytes.Equal(got, want) {
		t.Fatalf("standbyStatus:\n%x, want\n%x", got, want)
	}
}
