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
func Reader(opts []kgo.Opt, topic string, partition int32, from int64) (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clip(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
}
