package kafkasink

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sinkState is the sink's state and its one owner: the checkpoint, whether
// it may be planned against, the checkpoint in flight, where the next read
// of the checkpoint starts, the transaction that may still be open, and
// the fatal error that stopped the sink. Every change is one of the named
// transitions below; nothing else writes its fields.
//
// The checkpoint, the open transaction's age and the fatal error are read
// from any goroutine (Sink.Checkpoint, Stats, Ping); the rest is touched
// only by the Write that holds the sink's semaphore, or by New.
type sinkState struct {
	mu   sync.Mutex // guards ckpt
	ckpt Checkpoint
	// status says whether ckpt may be planned against.
	status ckptState
	// inflight is the checkpoint last sent whose outcome is not
	// confirmed yet; zero when none is.
	inflight Checkpoint
	// from is where the next read of the checkpoint starts: the offset
	// of the newest record of this sink seen so far, read or written.
	// Compaction never renumbers, so nothing of ours that is newer can
	// sit below it.
	from int64
	// txn is the transaction that may still be open: begun, and not
	// known to have ended since; nil when none may be. Its start is the
	// one record of its age, which the fencing decision and Stats read
	// (txnOpenFor). Atomic, for Stats.
	txn atomic.Pointer[openTxn]
	// outlived is how long the last transaction had been open when it
	// was aborted after outliving the sink's deadline, until a commit or
	// a new client confirms the producer id (settled); 0 otherwise. The
	// broker may have aborted that transaction at its timeout and moved
	// the epoch, so a fencing answer in the recovery after it is judged
	// with this age (fencingAge), although no transaction is open any
	// more. It is a fact a verdict reads, not one a verdict sets:
	// txnSink.abort records it before it asks for the verdict.
	outlived time.Duration
	// fatal, once set, is returned by every later Write (and by Ping):
	// fencing or an unusable checkpoint never heals by retrying.
	// Atomic, for Ping.
	fatal atomic.Pointer[error]
}

// ckptState says whether the in-memory checkpoint is what the broker has.
// It is explicit, never inferred from other facts (such as whether a
// client exists): planning, skipping and committing against a checkpoint
// that may be stale is how a recovered sink writes a part twice.
type ckptState uint8

const (
	// ckptUnverified: an outcome is unclear (a commit or abort that
	// failed or timed out, records sent without a confirmed
	// checkpoint), so the broker may hold a newer checkpoint than the
	// one in memory. Recovery must run before anything is planned.
	ckptUnverified ckptState = iota
	// ckptVerified: read back by a complete start-up or recovery, or
	// moved by a commit the broker confirmed.
	ckptVerified
)

// noOffset is the offset of a checkpoint record the broker reported none
// for (acks=0): committed then leaves where the next read starts.
const noOffset int64 = -1

// checkpoint returns the checkpoint; safe for concurrent use.
func (st *sinkState) checkpoint() Checkpoint {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.ckpt
}

func (st *sinkState) setCheckpoint(c Checkpoint) {
	st.mu.Lock()
	st.ckpt = c
	st.mu.Unlock()
}

// unverified reports whether recovery must read the checkpoint back
// before anything is planned.
func (st *sinkState) unverified() bool { return st.status == ckptUnverified }

// knows reports whether ck, read back, is a checkpoint this instance
// wrote: the one in memory or the one in flight.
func (st *sinkState) knows(ck Checkpoint) bool {
	return ck.same(st.checkpoint()) || ck.same(st.inflight)
}

// readBack reads the checkpoint from store, starting where the last read
// or commit left off, and moves that point to the newest record of this
// sink the read saw, also when the read fails. It returns the checkpoint
// known before the read too.
func (st *sinkState) readBack(ctx context.Context, store *checkpointStore, adm *kadm.Client, connOpts []kgo.Opt) (known, ck Checkpoint, err error) {
	known = st.checkpoint()
	ck, st.from, err = store.read(ctx, adm, connOpts, known, st.from)
	return known, ck, err
}

// sent: ck is on its way to the broker, its outcome not yet confirmed.
func (st *sinkState) sent(ck Checkpoint) { st.inflight = ck }

// committed: the broker confirmed ck, written at offset at (noOffset when
// it reported none). Whether the checkpoint is verified does not change.
func (st *sinkState) committed(ck Checkpoint, at int64) {
	if at != noOffset {
		st.from = at
	}
	st.setCheckpoint(ck)
	st.inflight = Checkpoint{}
}

// verified: ck was read back by a complete start-up or recovery; nothing
// is in flight any more.
func (st *sinkState) verified(ck Checkpoint) {
	st.setCheckpoint(ck)
	st.inflight = Checkpoint{}
	st.status = ckptVerified
}

// unclear: an outcome is unknown (see ckptUnverified). Only Sink.follow
// calls it, for a verdict that calls for recovery.
func (st *sinkState) unclear() { st.status = ckptUnverified }

// stop: err stops the sink for good. Only Sink.follow calls it, for a
// fatal verdict. Once stopped, the checkpoint's status no longer matters:
// nothing is planned again (Sink.enter refuses every later Write), and no
// transaction begins or is retried (verifyMarkers and commitPart return
// err first).
func (st *sinkState) stop(err error) { st.fatal.Store(&err) }

// stopped returns the fatal error that stopped the sink; nil while it
// runs. Safe for concurrent use.
func (st *sinkState) stopped() error {
	if err := st.fatal.Load(); err != nil {
		return *err
	}
	return nil
}

// txnBegun: t is open.
func (st *sinkState) txnBegun(t *openTxn) { st.txn.Store(t) }

// txnEnded: no transaction may be open any more (committed, aborted, or
// ended by recovery).
func (st *sinkState) txnEnded() { st.txn.Store(nil) }

// txnOutlived: a transaction aborted at age outlived the sink's deadline
// (see outlived).
func (st *sinkState) txnOutlived(age time.Duration) { st.outlived = age }

// settled: a commit confirmed the client's producer epoch, or a new
// client claimed the transactional id. (Recovery's re-initialisation does
// not count: kgo asks the broker only when it flagged the producer id.)
func (st *sinkState) settled() { st.outlived = 0 }

// fencingAge is the age a fencing answer is judged with (judgeFencing):
// the open transaction's, or else that of the last one, if it outlived
// the deadline and the client was not settled since.
func (st *sinkState) fencingAge() time.Duration { return max(st.txnOpenFor(), st.outlived) }

// txnOpenFor is how long the transaction that may still be open has been
// open; 0 when none may be. Safe for concurrent use: a transaction's start
// never changes. It is measured on the wall clock (Round(0) drops the
// monotonic reading), as it was when the start was kept in Unix
// nanoseconds for Stats.
func (st *sinkState) txnOpenFor() time.Duration {
	t := st.txn.Load()
	if t == nil {
		return 0
	}
	return time.Since(t.started.Round(0))
}
