package kafkasink

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkasink/kafkasink/internal/brokererr"
)

// TestJudgements pins the pure decisions on a failed transaction: for each
// error and how long the transaction had been open, the action the state
// machine takes and the class of the error Write returns. They change no
// state, so a table is the whole test.
func TestJudgements(t *testing.T) {
	cfg := &Config{TransactionalID: "tid", TransactionTimeout: 10 * time.Second}
	deadline := cfg.ownTxnDeadline() // 9s
	fenced := fmt.Errorf("committing: %w", kerr.ProducerFenced)
	oldEpoch := fmt.Errorf("writing event: %w", kerr.InvalidProducerEpoch)
	// A commit after the coordinator aborted the transaction and bumped
	// the epoch (transaction version 2), marked so by resolveCommit.
	endedOtherwise := brokererr.TxnEndedAtBroker(fmt.Errorf("committing: %w", kerr.InvalidTxnState))
	// A produce to a partition the transaction does not hold (transaction
	// version 1, after AddPartitionsToTxn failed): left unmarked.
	notInTxn := fmt.Errorf("writing event: %w", kerr.InvalidTxnState)
	// judgeFencing of a sink with Config.Guard set.
	guardedFencing := func(c *Config, err error, open time.Duration) verdict {
		g := *c
		g.Guard = func() error { return nil }
		return judgeFencing(&g, err, open)
	}
	lost := errors.New("connection reset")
	for _, tc := range []struct {
		name        string
		judge       func(*Config, error, time.Duration) verdict
		err         error
		open        time.Duration
		want        failureAction
		wantIs      []error // errors.Is must hold for each
		wantFatal   bool
		wantRetries bool
	}{
		{"txn: a lost connection within the deadline stands as it is", judgeTxnFailure, lost, time.Second, actRetry, []error{lost}, false, false},
		{"txn: fencing within the deadline is a newer instance", judgeTxnFailure, fenced, time.Second, actFatal, []error{ErrFenced, kerr.ProducerFenced}, true, false},
		{"txn: fencing after the deadline is the broker's timeout abort", judgeTxnFailure, fenced, deadline, actRecover, []error{ErrTransactionTimeout}, false, true},
		{"txn: a produce's old epoch within the deadline is for recovery to resolve", judgeTxnFailure, oldEpoch, time.Second, actRecover, []error{ErrTransactionAborted}, false, true},
		{"txn: any non-fatal error after the deadline is a transaction timeout", judgeTxnFailure, lost, deadline + time.Second, actRecover, []error{ErrTransactionTimeout, lost}, false, true},
		{"txn: ErrTransactionTimeout stays itself", judgeTxnFailure, ErrTransactionTimeout, time.Second, actRecover, []error{ErrTransactionTimeout}, false, true},
		{"txn: a fatal error after the deadline stays fatal", judgeTxnFailure, kerr.TransactionalIDAuthorizationFailed, deadline, actRetry, []error{kerr.TransactionalIDAuthorizationFailed}, true, false},
		{"fencing: not a fencing answer", judgeFencing, lost, 0, actRetry, []error{lost}, false, false},
		{"fencing: no transaction open", judgeFencing, fenced, 0, actFatal, []error{ErrFenced}, true, false},
		{"fencing: a transaction past the deadline may have been aborted by the broker", judgeFencing, fenced, deadline, actFatal, []error{ErrFenced, ErrTransactionTimeout}, true, false},
		{"fencing: with a Guard, a transaction past the deadline is claimed afresh", guardedFencing, fenced, deadline, actClaimAfresh, []error{ErrTransactionTimeout}, false, true},
		{"fencing: with a Guard, fencing within the deadline is claimed afresh too", guardedFencing, fenced, time.Second, actClaimAfresh, []error{ErrTransactionAborted}, false, true},
		{"txn: a commit refused INVALID_TXN_STATE within the deadline is fencing", judgeTxnFailure, endedOtherwise, time.Second, actFatal, []error{ErrFenced, kerr.InvalidTxnState}, true, false},
		{"txn: a commit refused INVALID_TXN_STATE after the deadline is the broker's timeout abort", judgeTxnFailure, endedOtherwise, deadline, actRecover, []error{ErrTransactionTimeout}, false, true},
		{"fencing: with a Guard, a commit refused INVALID_TXN_STATE is claimed afresh", guardedFencing, endedOtherwise, time.Second, actClaimAfresh, []error{ErrTransactionAborted}, false, true},
		{"txn: a produce refused INVALID_TXN_STATE is no fencing", judgeTxnFailure, notInTxn, time.Second, actRetry, []error{kerr.InvalidTxnState}, false, false},
		{"fencing: with a Guard, a produce refused INVALID_TXN_STATE is not claimed afresh", guardedFencing, notInTxn, time.Second, actRetry, []error{kerr.InvalidTxnState}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.judge(cfg, tc.err, tc.open)
			if v.action != tc.want {
				t.Errorf("action = %d, want %d (error %v)", v.action, tc.want, v.err)
			}
			for _, target := range tc.wantIs {
				if !errors.Is(v.err, target) {
					t.Errorf("error %v is not %v", v.err, target)
				}
			}
			if IsFatal(v.err) != tc.wantFatal || IsRetryable(v.err) != tc.wantRetries {
				t.Errorf("error %v: fatal %t retryable %t, want %t %t", v.err, IsFatal(v.err), IsRetryable(v.err), tc.wantFatal, tc.wantRetries)
			}
		})
	}
}
