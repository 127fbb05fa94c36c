package kafkasink

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestStateTransitions pins what each transition of sinkState changes.
func TestStateTransitions(t *testing.T) {
	t.Parallel()
	ck1 := Checkpoint{Position: Position{LSN: 10}, Mode: ExactlyOnce, Time: time.Unix(1, 0)}
	ck2 := Checkpoint{Position: Position{LSN: 20}, Mode: ExactlyOnce, Time: time.Unix(2, 0)}
	var st sinkState
	if !st.unverified() {
		t.Fatal("a new state is verified; want unverified until the start-up reads the checkpoint")
	}
	st.verified(ck1)
	if st.unverified() || !st.checkpoint().same(ck1) {
		t.Fatalf("after verified: unverified=%v checkpoint %v, want verified at %v", st.unverified(), st.checkpoint().Position, ck1.Position)
	}
	st.sent(ck2)
	if !st.knows(ck1) || !st.knows(ck2) || st.knows(Checkpoint{Position: Position{LSN: 30}}) {
		t.Fatal("with ck2 in flight, knows should accept the checkpoint in memory and the one in flight, and nothing else")
	}
	st.committed(ck2, 7)
	if !st.checkpoint().same(ck2) || st.from != 7 || !st.inflight.IsZero() || st.knows(ck1) || st.unverified() {
		t.Fatalf("after committed: checkpoint %v, from %d, in flight %v, knows ck1 %v, unverified %v; want ck2, 7, none, false, false",
			st.checkpoint().Position, st.from, st.inflight.Position, st.knows(ck1), st.unverified())
	}
	st.sent(ck1)
	st.verified(ck2)
	if !st.inflight.IsZero() {
		t.Fatal("verified left a checkpoint in flight")
	}
	st.committed(ck1, noOffset)
	if st.from != 7 {
		t.Fatalf("committed without an offset moved from to %d, want it left at 7", st.from)
	}
	st.unclear()
	if !st.unverified() || !st.checkpoint().same(ck1) {
		t.Fatal("unclear must make the checkpoint unverified and leave it as it is")
	}
	if st.stopped() != nil {
		t.Fatal("a running state reports stopped")
	}
	fenced := errors.New("fenced")
	st.stop(fenced)
	if st.stopped() != fenced {
		t.Fatalf("stopped() = %v, want the error stop was given", st.stopped())
	}
}

// TestStateOpenTransaction pins that the open transaction's age is read
// from its start while it may be open, and is zero otherwise.
func TestStateOpenTransaction(t *testing.T) {
	t.Parallel()
	var st sinkState
	if d := st.txnOpenFor(); d != 0 {
		t.Fatalf("txnOpenFor with no transaction = %v, want 0", d)
	}
	st.txnBegun(&openTxn{started: time.Now().Add(-time.Minute)})
	if d := st.txnOpenFor(); d < time.Minute || d > 2*time.Minute {
		t.Fatalf("txnOpenFor a transaction begun a minute ago = %v", d)
	}
	st.txnEnded()
	if d := st.txnOpenFor(); d != 0 {
		t.Fatalf("txnOpenFor after txnEnded = %v, want 0", d)
	}
}

// TestStateFencingAge pins that a fencing answer after a transaction was
// aborted for outliving the deadline is judged with that transaction's
// age until a commit or a new client settles it: without a guard the
// sink stops saying the broker may have aborted it at its timeout.
func TestStateFencingAge(t *testing.T) {
	t.Parallel()
	cfg := Config{TransactionalID: "t", TransactionTimeout: 10 * time.Second}
	fenced := kerr.ProducerFenced
	var st sinkState
	st.txnBegun(&openTxn{started: time.Now().Add(-time.Minute)})
	st.txnEnded()
	st.txnOutlived(time.Minute)
	if d := st.fencingAge(); d != time.Minute {
		t.Fatalf("fencingAge after an outlived transaction ended = %v, want its age, 1m", d)
	}
	if v := judgeFencing(&cfg, fenced, st.fencingAge()); v.action != actFatal || !errors.Is(v.err, ErrFenced) || !errors.Is(v.err, ErrTransactionTimeout) {
		t.Fatalf("judged with that age: %v (action %d), want a fatal ErrFenced that wraps ErrTransactionTimeout", v.err, v.action)
	}
	st.settled()
	if d := st.fencingAge(); d != 0 {
		t.Fatalf("fencingAge after settled = %v, want 0", d)
	}
	if v := judgeFencing(&cfg, fenced, st.fencingAge()); errors.Is(v.err, ErrTransactionTimeout) {
		t.Fatalf("judged after settled: %v, want no timeout named", v.err)
	}
}

// TestVerdictRecovering pins that a step after which the checkpoint is
// unclear calls for recovery at least, and keeps stronger verdicts.
func TestVerdictRecovering(t *testing.T) {
	t.Parallel()
	err := errors.New("x")
	for _, tc := range []struct{ in, want failureAction }{
		{actRetry, actRecover},
		{actRecover, actRecover},
		{actFatal, actFatal},
		{actClaimAfresh, actClaimAfresh},
	} {
		if v := (verdict{err, tc.in}).recovering(); v.action != tc.want || v.err != err {
			t.Errorf("verdict{%d}.recovering() = {%v, %d}, want {%v, %d}", tc.in, v.err, v.action, err, tc.want)
		}
	}
}
