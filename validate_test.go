package kafkasink_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// TestValidateIsNewsCheckWithoutConnecting: Validate returns the problems
// New returns for the same Config, and nil for a Config New accepts,
// without dialing the brokers (a listener that counts connections).
func TestValidateIsNewsCheckWithoutConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case dialed <- struct{}{}:
			default:
			}
		}
	}()

	good := kafkasink.Config{Brokers: []string{ln.Addr().String()}, SinkID: "s"}
	if err := good.Validate(); err != nil {
		t.Errorf("a valid Config: %v", err)
	}
	bad := good
	bad.SinkID = "no/slash"
	bad.Topics.Prefix = "bad/prefix"
	bad.SASL = &kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA256}
	verr := bad.Validate()
	var ce *kafkasink.ConfigError
	if !errors.As(verr, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("an invalid Config: %v, want a *ConfigError with 3 problems", verr)
	}
	if _, nerr := kafkasink.New(context.Background(), bad); nerr == nil || nerr.Error() != verr.Error() {
		t.Errorf("New: %v\nValidate: %v\nwant the same problems", nerr, verr)
	}
	select {
	case <-dialed:
		t.Error("Validate or a refusing New dialed the broker")
	default:
	}
}
