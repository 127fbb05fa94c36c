package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestOutboxExample runs the example against the test environment's
// PostgreSQL and a fake cluster: the committed payment's event arrives
// once, the rolled-back one's never.
func TestOutboxExample(t *testing.T) {
	pg := os.Getenv("KAFKASINK_TEST_PG")
	if pg == "" {
		t.Skip("KAFKASINK_TEST_PG is not set: the example needs a PostgreSQL with wal_level=logical; scripts/testenv.sh starts one")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, pg, c.ListenAddrs(), fmt.Sprintf("example_outbox_%06d", rand.IntN(1e6)), &out); err != nil {
		t.Fatal(err)
	}
	const want = "orders.events key=1 value={\"order\":1,\"state\":\"paid\"} type=OrderPaid\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
