package pgcdc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// TestValidateIsRunsCheck: Config.Validate and LeaseConfig.Validate
// return the problems Run and AcquireLease return for the same configs,
// which they do before connecting (port 1 of the loopback: a connection
// would fail with another error), and nil for valid ones.
func TestValidateIsRunsCheck(t *testing.T) {
	const conn = "postgres://cdc@127.0.0.1:1/db"
	good := Config{ConnString: conn, Slot: "s", Publication: "p"}
	if err := good.Validate(); err != nil {
		t.Errorf("a valid Config: %v", err)
	}
	bad := good
	bad.Slot, bad.BatchMaxEvents = "My-Slot", -1
	verr := bad.Validate()
	var ce *kafkasink.ConfigError
	if !errors.As(verr, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("an invalid Config: %v, want a *kafkasink.ConfigError with 2 problems", verr)
	}
	if rerr := Run(context.Background(), bad, noSink{}); rerr == nil || rerr.Error() != verr.Error() {
		t.Errorf("Run: %v\nValidate: %v\nwant the same problems", rerr, verr)
	}

	lease := LeaseConfig{ConnString: conn, Slot: "s"}
	if err := lease.Validate(); err != nil {
		t.Errorf("a valid LeaseConfig: %v", err)
	}
	lease.Timeout = 100 * time.Millisecond
	verr = lease.Validate()
	if !errors.As(verr, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("a LeaseConfig with a short Timeout: %v, want a *kafkasink.ConfigError with 1 problem", verr)
	}
	if _, lerr := AcquireLease(context.Background(), lease); lerr == nil || lerr.Error() != verr.Error() {
		t.Errorf("AcquireLease: %v\nValidate: %v\nwant the same problems", lerr, verr)
	}
}

// noSink is a Sink for a Run that must not get as far as writing.
type noSink struct{}

func (noSink) Write(context.Context, kafkasink.Batch) error { return errors.New("written") }
func (noSink) Checkpoint() kafkasink.Checkpoint             { return kafkasink.Checkpoint{} }
