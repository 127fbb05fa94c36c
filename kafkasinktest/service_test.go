package kafkasinktest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// docs/testing-your-service.md shows the code between the markers below,
// and TestDocShowsServiceTest keeps the two the same.

// docs begin
// syncOrders is the service under test: it writes each batch of its source
// until it is delivered (back off between attempts in production).
func syncOrders(ctx context.Context, sink *kafkasink.Sink, batches <-chan kafkasink.Batch) error {
	for b := range batches {
		for err := sink.Write(ctx, b); err != nil; err = sink.Write(ctx, b) {
			if !kafkasink.IsRetryable(err) {
				return err
			}
		}
	}
	return nil
}

func TestSyncOrdersSurvivesLostCommit(t *testing.T) {
	cluster := kafkasinktest.NewCluster(t)
	cfg := kafkasink.Config{Brokers: cluster.Brokers(), SinkID: "orders", TransactionTimeout: 3 * time.Second}
	sink, err := kafkasink.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())

	var want []kafkasink.Event
	batches := make(chan kafkasink.Batch, 3)
	for lsn := kafkasink.LSN(1); lsn <= 3; lsn++ {
		e := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders", Key: []string{"id"},
			Position: kafkasink.Position{LSN: lsn}, After: kafkasink.Row{{Name: "id", Value: int64(lsn)}}}
		want = append(want, e)
		batches <- kafkasink.Batch{Events: []kafkasink.Event{e}}
	}
	close(batches)

	lost := cluster.LoseCommitAnswer() // the first commit applies; its answer is lost
	if err := syncOrders(context.Background(), sink, batches); err != nil || lost.Hits() == 0 {
		t.Fatalf("syncOrders: %v; commit answers lost: %d", err, lost.Hits())
	}
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, "kafkasink.public.orders"), want)
	kafkasinktest.AssertCheckpoint(t, cfg, want[2].Position)
}

// docs end

// docs/testing-your-service.md shows the test above as it is, in under 40
// lines.
func TestDocShowsServiceTest(t *testing.T) {
	src, err := os.ReadFile("service_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// docs begin\n")
	code, _, _ = strings.Cut(code, "\n// docs end")
	readme, err := os.ReadFile("../docs/testing-your-service.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "# Testing your service\n")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/testing-your-service.md has no "# Testing your service" with a go block`)
	}
	if strings.TrimSpace(block) != strings.TrimSpace(code) {
		t.Errorf("docs/testing-your-service.md differs from the test in service_test.go; copy it there:\n%s", code)
	}
	if n := strings.Count(strings.TrimSpace(code), "\n") + 1; n >= 40 {
		t.Errorf("the service test is %d lines, want under 40", n)
	}
}
