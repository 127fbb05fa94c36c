// Package committed makes the clients that read one partition as a
// read_committed consumer sees it, control records included, so that
// the commit or abort marker that ends a transaction also ends a read
// that waits for its records.
package committed

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Reader returns a client of opts that reads topic's partition from
// offset from, read_committed, keeping control records.
//
// It uses no fetch session: a reader lives for one short read, so a
// session saves nothing, and franz-go (v1.22.3) races closing one (Close
// reads the session's id while a fetch still in flight writes it; the
// race detector caught it in the fault checker's read-backs).
func Reader(opts []kgo.Opt, topic string, partition int32, from int64) (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clip(opts),
		kgo.DisableFetchSessions(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
}
