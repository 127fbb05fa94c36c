package kafkasink_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkasink/kafkasink"
)

func TestClassification(t *testing.T) {
	t.Parallel()
	rejected := &kafkasink.RejectedError{Rejections: []kafkasink.Rejection{
		{Position: kafkasink.Position{LSN: 1, Index: 0}, Schema: "public", Table: "t", Reason: kafkasink.ReasonUnencodable, Err: errors.New("bad")},
		{Position: kafkasink.Position{LSN: 1, Index: 1}, Schema: "public", Table: "t", Reason: kafkasink.ReasonTooLarge, Err: errors.New("big")},
	}}
	opErr := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}, Err: syscall.ECONNREFUSED}
	unknownCA := x509.UnknownAuthorityError{}

	tests := []struct {
		name                         string
		err                          error
		retryable, fatal, isRejected bool
	}{
		{"ErrClosed", kafkasink.ErrClosed, false, true, false},
		{"ErrFenced", kafkasink.ErrFenced, false, true, false},
		{"ErrInvalidBatch", kafkasink.ErrInvalidBatch, false, true, false},
		{"ErrTopicMissing", kafkasink.ErrTopicMissing, false, true, false},
		{"ErrCheckpoint", kafkasink.ErrCheckpoint, false, true, false},
		{"ErrUnsafeCheckpointTopic", kafkasink.ErrUnsafeCheckpointTopic, false, true, false},
		{"ErrTransactionTimeout", kafkasink.ErrTransactionTimeout, true, false, false},
		{"ErrTransactionAborted wrapping a non-retriable code", fmt.Errorf("%w: %w", kafkasink.ErrTransactionAborted, kerr.InvalidTxnState), true, false, false},
		{"ConfigError", &kafkasink.ConfigError{Problems: []string{"SinkID is empty"}}, false, true, false},
		{"RejectedError", rejected, false, false, true},
		// An Encoder's Preparer decides: a registry that answered 5xx
		// (retryable), or refused a schema (fatal); a retryable one
		// wrapping an error that is fatal on its own stays retryable.
		{"PrepareError retryable", &kafkasink.PrepareError{Retryable: true, Err: errors.New("registry answered 503")}, true, false, false},
		{"PrepareError fatal", &kafkasink.PrepareError{Err: errors.New("registry refused the schema: incompatible")}, false, true, false},
		{"PrepareError retryable wrapping an x509 error", &kafkasink.PrepareError{Retryable: true, Err: unknownCA}, true, false, false},
		{"ProducerFenced", kerr.ProducerFenced, false, true, false},
		{"NotLeaderForPartition", kerr.NotLeaderForPartition, true, false, false},
		{"RequestTimedOut", kerr.RequestTimedOut, true, false, false},
		{"TopicAuthorizationFailed", kerr.TopicAuthorizationFailed, false, true, false},
		{"SaslAuthenticationFailed", kerr.SaslAuthenticationFailed, false, true, false},
		// The caller's own context ending is in no class: the caller
		// chose to stop, and a retry loop must not spin at shutdown.
		{"context.DeadlineExceeded", context.DeadlineExceeded, false, false, false},
		{"context.Canceled", context.Canceled, false, false, false},
		{"ErrUnexpected wrapping INVALID_RECORD", fmt.Errorf("%w: %w", kafkasink.ErrUnexpected, kerr.InvalidRecord), false, true, false},
		{"io.EOF", io.EOF, true, false, false},
		{"net.OpError", opErr, true, false, false},
		{"x509.UnknownAuthorityError", unknownCA, false, true, false},
		// A TLS failure arrives inside a net.OpError, which alone is
		// retryable: the certificate problem must win.
		{"net.OpError holding an x509 error", &net.OpError{Op: "remote error", Net: "tcp", Err: unknownCA}, false, true, false},
	}
	wraps := []struct {
		name string
		wrap func(error) error
	}{
		{"bare", func(err error) error { return err }},
		{"fmt.Errorf", func(err error) error { return fmt.Errorf("kafkasink: doing something: %w", err) }},
		{"WriteError in fmt.Errorf", func(err error) error {
			return fmt.Errorf("outer: %w", &kafkasink.WriteError{Topic: "t", Partition: 0, Position: kafkasink.Position{LSN: 5}, Err: err})
		}},
	}
	for _, tt := range tests {
		for _, w := range wraps {
			t.Run(tt.name+"/"+w.name, func(t *testing.T) {
				t.Parallel()
				err := w.wrap(tt.err)
				if got := kafkasink.IsRetryable(err); got != tt.retryable {
					t.Errorf("IsRetryable(%v) = %v, want %v", err, got, tt.retryable)
				}
				if got := kafkasink.IsFatal(err); got != tt.fatal {
					t.Errorf("IsFatal(%v) = %v, want %v", err, got, tt.fatal)
				}
				rs, got := kafkasink.IsRejected(err)
				if got != tt.isRejected {
					t.Errorf("IsRejected(%v) = %v, want %v", err, got, tt.isRejected)
				}
				if tt.isRejected && len(rs) != len(rejected.Rejections) {
					t.Errorf("IsRejected returned %d rejections, want %d", len(rs), len(rejected.Rejections))
				}
				if !tt.isRejected && rs != nil {
					t.Errorf("IsRejected returned rejections %v for a non-rejection", rs)
				}
			})
		}
	}

	t.Run("nil", func(t *testing.T) {
		t.Parallel()
		_, rej := kafkasink.IsRejected(nil)
		if kafkasink.IsRetryable(nil) || kafkasink.IsFatal(nil) || rej {
			t.Errorf("nil classified as retryable=%v fatal=%v rejected=%v", kafkasink.IsRetryable(nil), kafkasink.IsFatal(nil), rej)
		}
	})
}

func TestWriteErrorMessage(t *testing.T) {
	t.Parallel()
	err := error(&kafkasink.WriteError{
		Topic:     "cdc.public.orders",
		Partition: 7,
		Position:  kafkasink.Position{LSN: 0x16B374D848, Index: 3},
		Err:       kerr.NotLeaderForPartition,
	})
	msg := err.Error()
	for _, want := range []string{"cdc.public.orders", "[7]", "16/B374D848:3", "NOT_LEADER_FOR_PARTITION"} {
		if !strings.Contains(msg, want) {
			t.Errorf("WriteError message %q does not contain %q", msg, want)
		}
	}
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("WriteError does not unwrap to its Err")
	}
}

func TestRejectedErrorMessage(t *testing.T) {
	t.Parallel()
	mk := func(i uint64, reason kafkasink.Reason) kafkasink.Rejection {
		return kafkasink.Rejection{
			Position: kafkasink.Position{LSN: 0x100, Index: i},
			Schema:   "public", Table: fmt.Sprintf("table%d", i),
			Reason: reason, Err: fmt.Errorf("cause %d", i),
		}
	}
	t.Run("all listed", func(t *testing.T) {
		t.Parallel()
		err := &kafkasink.RejectedError{Rejections: []kafkasink.Rejection{
			mk(0, kafkasink.ReasonUnencodable), mk(1, kafkasink.ReasonTooLarge), mk(2, kafkasink.ReasonNoKey),
		}}
		msg := err.Error()
		for _, want := range []string{
			"3 event(s) rejected", "DeadLetterTopic",
			"0/100:0", "public.table0", "(unencodable)", "cause 0",
			"0/100:1", "public.table1", "(too_large)", "cause 1",
			"0/100:2", "public.table2", "(no_key)", "cause 2",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("RejectedError message %q does not contain %q", msg, want)
			}
		}
	})
	t.Run("long list truncated", func(t *testing.T) {
		t.Parallel()
		var rs []kafkasink.Rejection
		for i := range uint64(5) {
			rs = append(rs, mk(i, kafkasink.ReasonUnroutable))
		}
		msg := (&kafkasink.RejectedError{Rejections: rs}).Error()
		for _, want := range []string{"5 event(s) rejected", "(unroutable)", "0/100:2", "and 2 more"} {
			if !strings.Contains(msg, want) {
				t.Errorf("RejectedError message %q does not contain %q", msg, want)
			}
		}
		if strings.Contains(msg, "0/100:3") {
			t.Errorf("RejectedError message %q lists more than three rejections", msg)
		}
	})
}
