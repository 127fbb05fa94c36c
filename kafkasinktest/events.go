package kafkasinktest

import (
	"fmt"
	"time"

	"github.com/kafkasink/kafkasink"
)

// Inserts returns n insert events into schema.table, one source
// transaction committed at lsn: rows of the key column id (from, from+1,
// ...) and a column name ("row-<id>"); event i at position lsn:i, with
// LSN lsn-n+i, transaction id uint32(lsn) and commit time 2026-01-01 UTC.
// Two calls with the same arguments return equal events, so a test can
// write them and compare what it reads with them (AssertExactlyOnce).
func Inserts(schema, table string, lsn kafkasink.LSN, from, n int) []kafkasink.Event {
	out := make([]kafkasink.Event, n)
	for i := range out {
		id := from + i
		out[i] = kafkasink.Event{
			Op:       kafkasink.OpInsert,
			Schema:   schema,
			Table:    table,
			Position: kafkasink.Position{LSN: lsn, Index: uint64(i)},
			LSN:      lsn - kafkasink.LSN(n-i),
			XID:      uint32(lsn),
			Commit:   time.Unix(1767225600, 0).UTC(),
			Key:      []string{"id"},
			After: kafkasink.Row{
				{Name: "id", Value: int64(id)},
				{Name: "name", Value: fmt.Sprintf("row-%d", id)},
			},
		}
	}
	return out
}
