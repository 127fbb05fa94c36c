package kafkasink_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestTooLargeRejectedBeforeEncoding writes an event with a 64 MiB value
// to a topic that takes 2 KiB: the sink must see from the value's length
// that the record cannot fit and reject it without encoding it, with and
// without a dead-letter topic (which takes 2 KiB as well). Encoding it
// would allocate at least its size. Not parallel: it measures the process's
// allocations.
func TestTooLargeRejectedBeforeEncoding(t *testing.T) {
	_, brokers := sinktest.Cluster(t)
	big := strings.Repeat("x", 64<<20)
	for _, dlq := range []string{"", "too-large-early.dead"} {
		name := "no dead-letter topic"
		if dlq != "" {
			name = "dead-letter topic"
			createTopic(t, brokers, dlq, 1, map[string]string{"max.message.bytes": "2048"})
		}
		t.Run(name, func(t *testing.T) {
			id := "too-large-early" + strings.ReplaceAll(name, " ", "-")
			createTopic(t, brokers, id+".public.big", 1, map[string]string{"max.message.bytes": "2048"})
			s := newSink(t, brokers, id, func(c *kafkasink.Config) {
				c.Topics.Prefix = id
				c.DeadLetterTopic = dlq
			})
			e := withColumn(sinktest.Inserts("public", "big", 100, 1, 1)[0], "name", big)
			write(t, s, sinktest.Inserts("public", "big", 50, 1, 1)) // topics and routes in place

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tryWrite(t, s, kafkasink.Batch{Events: []kafkasink.Event{e}})
			runtime.ReadMemStats(&after)

			if dlq == "" {
				checkRejected(t, err, e, kafkasink.ReasonTooLarge, id+".public.big", "record of at least 671090")
			} else if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
				t.Errorf("Write allocated %d MiB for a record it refuses, want under 8 MiB: the value was encoded", n>>20)
			}
		})
	}
}
