package kafkasink_test

import (
	"os"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// checkWithExternalReaders reads topic with kcat and with Kafka's Java
// console consumer, both read_committed, and checks each sees every event
// of want exactly once. They need the real broker; against the in-process
// fake cluster the tests use sinktest.ReadCommitted only.
func checkWithExternalReaders(t *testing.T, brokers []string, topic string, want []kafkasink.Event) {
	t.Helper()
	if os.Getenv("KAFKASINK_TEST_BROKERS") == "" {
		t.Log("external readers (kcat, Java console consumer) run against the real broker only: set up scripts/testenv.sh")
		return
	}
	ids := make([]string, len(want))
	for i := range want {
		ids[i] = want[i].ID()
	}
	sinktest.CheckExternalReaders(t, brokers, topic, ids)
}
