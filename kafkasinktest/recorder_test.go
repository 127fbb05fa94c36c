package kafkasinktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// The Recorder keeps the sink's contract: redelivered events skipped, a
// failed batch owed until written again, a fatal error sticky, invalid
// batches and Writes after Close refused.
func TestRecorderKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := kafkasinktest.NewRecorder(kafkasink.Checkpoint{})
	a, b, c, d := orders(100, 1, 3), orders(200, 4, 3), orders(300, 7, 3), orders(400, 10, 3)
	write := func(events []kafkasink.Event, cursor string) error {
		batch := kafkasink.Batch{Events: events}
		if cursor != "" {
			batch.Cursor = []byte(cursor)
		}
		return rec.Write(ctx, batch)
	}
	if err := write(a, ""); err != nil {
		t.Fatal(err)
	}
	if err := write(append(a[1:], b...), `{"after":"b"}`); err != nil { // a redelivered in part
		t.Fatal(err)
	}
	if got := rec.Checkpoint(); got.Position != b[2].Position || string(got.Cursor) != `{"after":"b"}` {
		t.Fatalf("checkpoint %s %s, want %s with the batch's cursor", got.Position, got.Cursor, b[2].Position)
	}

	rec.FailWrite(3, kafkasinktest.ErrRetryable)
	if err := write(c, ""); !kafkasink.IsRetryable(err) {
		t.Fatalf("Write 3: %v, want a retryable error", err)
	}
	if err := write(d, ""); !errors.Is(err, kafkasink.ErrInvalidBatch) || !strings.Contains(err.Error(), c[0].Position.String()) {
		t.Fatalf("Write past the failed batch: %v, want ErrInvalidBatch naming %s", err, c[0].Position)
	}
	if err := write(append(b, c...), ""); err != nil { // redelivered from before it: fine
		t.Fatal(err)
	}
	noSchema := d[0]
	noSchema.Schema = ""
	for name, bad := range map[string]error{
		"positions out of order":    write([]kafkasink.Event{d[1], d[0]}, ""),
		"an event without schema":   write([]kafkasink.Event{noSchema}, ""),
		"a cursor that is not JSON": write(d, "{"),
	} {
		if !errors.Is(bad, kafkasink.ErrInvalidBatch) {
			t.Fatalf("Write of %s: %v, want ErrInvalidBatch", name, bad)
		}
	}

	rec.FailWrite(9, kafkasinktest.ErrFatal)
	for n := 9; n <= 10; n++ {
		if err := write(d, ""); !kafkasink.IsFatal(err) || !errors.Is(err, kafkasink.ErrFenced) {
			t.Fatalf("Write %d: %v, want the fatal error", n, err)
		}
	}
	if rec.Writes() != 10 {
		t.Errorf("Writes() = %d, want 10", rec.Writes())
	}
	kafkasinktest.AssertEvents(t, rec.Events(), join(a, b, c))
	if got := len(rec.Batches()); got != 3 {
		t.Errorf("%d batches recorded, want the 3 that succeeded", got)
	}

	rec = kafkasinktest.NewRecorder(kafkasink.Checkpoint{Position: a[2].Position})
	if err := write(join(a, b), ""); err != nil {
		t.Fatal(err)
	}
	kafkasinktest.AssertEvents(t, rec.Events(), b) // a was delivered before the start checkpoint
	rec.Close(ctx)
	rec.Close(ctx)
	if err := write(c, ""); !errors.Is(err, kafkasink.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}
