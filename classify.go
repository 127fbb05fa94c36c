package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkasink/kafkasink/internal/brokererr"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
)

// This file is error classification: which class an error is in
// (retryable, fatal, rejected, or none when the caller's own context
// ended), and what a failure of this instance's transactions calls for.
// The errors themselves are in errors.go; what the brokers' and the
// network's errors mean for a retry is internal/brokererr's.

// IsRejected reports whether err rejects events of a batch, and returns the
// rejections.
func IsRejected(err error) ([]Rejection, bool) {
	var re *RejectedError
	if errors.As(err, &re) {
		return re.Rejections, true
	}
	return nil, false
}

// IsRetryable reports whether the same batch may be written again after err:
// timeouts of the sink's own deadlines, lost connections, leader moves,
// aborted or timed-out transactions, and broker errors Kafka marks
// retriable. A retry never duplicates what a read_committed consumer sees
// in exactly-once mode.
//
// An error caused by the caller's own context ending (context.Canceled,
// context.DeadlineExceeded) is not retryable: the caller chose to stop.
func IsRetryable(err error) bool {
	if err == nil || IsFatal(err) {
		return false
	}
	if _, ok := IsRejected(err); ok {
		return false
	}
	// An Encoder's verdict on its own failure stands.
	var pe *PrepareError
	if errors.As(err, &pe) {
		return pe.Retryable
	}
	// The sink's own verdicts come first: an aborted transaction can be
	// written again whatever the broker's code in it says.
	var te *ctxerr.Timeout
	if errors.Is(err, ErrTransactionTimeout) || errors.Is(err, ErrTransactionAborted) || errors.Is(err, errAbortUnchecked) || errors.As(err, &te) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return brokererr.Retriable(err)
}

// IsFatal reports whether err means the pipeline must stop: fencing,
// authentication and authorisation failures, TLS failures, a missing topic,
// an invalid configuration or batch, an unusable checkpoint, a closed sink.
func IsFatal(err error) bool {
	if err == nil {
		return false
	}
	for _, sentinel := range []error{ErrClosed, ErrFenced, ErrInvalidBatch, ErrTopicMissing, ErrCheckpoint, ErrUnsafeCheckpointTopic, ErrUnexpected} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return true
	}
	var pe *PrepareError
	if errors.As(err, &pe) {
		return !pe.Retryable
	}
	return brokererr.Fatal(err)
}

// classified gives an error leaving New or Write exactly one class:
// rejected, fatal or retryable, except when the caller's own ctx ended,
// which is in none (the caller chose to stop): it wraps context.Cause(ctx).
// An error of no known class is fatal (ErrUnexpected).
func classified(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := IsRejected(err); ok || IsFatal(err) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("kafkasink: stopped because the caller's context ended: %w (last error: %v)", context.Cause(ctx), err)
	}
	if IsRetryable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnexpected, err)
}

// failureAction is what a failure calls for. The decisions below only
// return it, and Sink.follow acts on it, so that no decision changes state
// behind its caller's back.
type failureAction uint8

const (
	// actRetry: the error stands, and the batch may be written again. The
	// decision changes nothing; whether the checkpoint is still verified
	// is for the step that failed to say (an abort that failed, say).
	actRetry failureAction = iota
	// actRecover: the checkpoint is unverified (ckptUnverified) until
	// recovery reads it back.
	actRecover
	// actFatal: this instance must stop; every later Write returns the
	// error.
	actFatal
	// actClaimAfresh: the broker fenced this instance, and Config.Guard
	// is set: the sink claims the transactional id afresh, as New does,
	// if the client cannot recover its producer id and the guard
	// consents (see txnSink.claimAfresh); the checkpoint is unverified
	// until it is read back after the claim.
	actClaimAfresh
)

// verdict is a decided failure: the error Write returns, and what the sink
// does next.
type verdict struct {
	err    error
	action failureAction
}

// recovering is v for a step after which the broker may hold a newer
// checkpoint whatever the error (an abort, a commit that failed): actRetry
// becomes actRecover. The other actions make the checkpoint unverified
// too, or stop the sink, after which nothing reads it.
func (v verdict) recovering() verdict {
	if v.action == actRetry {
		v.action = actRecover
	}
	return v
}

// timeoutFix is what to do about transactions that outlive their time.
const timeoutFix = "lower Config.MaxTransactionRecords or raise Config.TransactionTimeout"

// judgeTxnFailure decides what an error of one of this instance's
// transactions calls for; open is how long the transaction had been open,
// to compare with the sink's own limit on it (Config.ownTxnDeadline).
//
// Fencing answers are judgeFencing's (which says what they may mean), but
// for a produce's INVALID_PRODUCER_EPOCH within the deadline, which
// recovery resolves (actRecover); an error after the transaction outlived
// its deadline is an ErrTransactionTimeout (actRecover).
func judgeTxnFailure(cfg *Config, err error, open time.Duration) verdict {
	timedOut := open >= cfg.ownTxnDeadline()
	switch {
	case errors.Is(err, ErrTransactionTimeout):
		return verdict{err, actRecover}
	case timedOut && brokererr.Fencing(err):
		return verdict{fmt.Errorf("%w (after %v; %s): the broker aborted it: %v", ErrTransactionTimeout, open.Round(time.Millisecond), timeoutFix, err), actRecover}
	case timedOut && !IsFatal(err):
		return verdict{fmt.Errorf("%w (after %v; %s): %w", ErrTransactionTimeout, open.Round(time.Millisecond), timeoutFix, err), actRecover}
	case errors.Is(err, kerr.InvalidProducerEpoch):
		return verdict{fmt.Errorf("%w: the broker refused this instance's producer epoch (%v): recovery asks it whether a newer instance claimed the transactional id", ErrTransactionAborted, err), actRecover}
	}
	return judgeFencing(cfg, err, open)
}

// judgeFencing returns the terminal ErrFenced (actFatal) when err says a
// newer instance claimed the transactional id, and err as it is otherwise.
// open is how long a transaction of this instance that may still be open
// has been open, 0 when none may be.
//
// A newer instance's claim is not the only cause of that answer. The
// broker's own timeout abort bumps the epoch when the transaction outlived
// its deadline, and an older instance's recovery (its re-initialisation at
// an old epoch) makes Kafka abort this instance's open transaction and
// bump the epoch before it answers the older one PRODUCER_FENCED. Only the
// broker knows which it was: recovery re-initialises the producer id at
// its current epoch, which the broker allows after its own bump (KIP-588)
// and refuses with PRODUCER_FENCED after a newer claim. After either
// bump, though, the client may be unable to recover its producer id, and
// only claiming the transactional id afresh lets the sink go on. New does
// that; a running sink does it (actClaimAfresh) only when Config.Guard is
// set (see txnSink.claimAfresh). Without a guard the error says what the
// answer may mean.
func judgeFencing(cfg *Config, err error, open time.Duration) verdict {
	timedOut := open > 0 && open >= cfg.ownTxnDeadline()
	switch {
	case !brokererr.Fencing(err):
		return verdict{err, actRetry}
	case cfg.Guard != nil && timedOut:
		return verdict{fmt.Errorf("%w (after %v; %s): the broker aborted this instance's transaction at its timeout (%v); Config.Guard is set, so the sink claims its transactional id afresh if the guard consents",
			ErrTransactionTimeout, open.Round(time.Millisecond), timeoutFix, err), actClaimAfresh}
	case cfg.Guard != nil:
		return verdict{fmt.Errorf("%w: the broker fenced this instance's producer epoch (%v): an older instance's recovery can do that too; Config.Guard is set, so the sink claims its transactional id afresh if the guard consents",
			ErrTransactionAborted, err), actClaimAfresh}
	case timedOut:
		return verdict{fmt.Errorf("%w (transactional id %q), or the broker aborted this instance's transaction, open for %v, at its timeout (%w): either way it cannot go on without claiming the transactional id afresh, which only New does, or a sink with Config.Guard set: close this sink and start a new one: %w",
			ErrFenced, cfg.TransactionalID, open.Round(time.Millisecond), ErrTransactionTimeout, err), actFatal}
	}
	return verdict{fmt.Errorf("%w (transactional id %q), or an older instance's recovery aborted this instance's transaction (Config.Guard keeps older instances from doing that): %w", ErrFenced, cfg.TransactionalID, err), actFatal}
}
