package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/checkpointlog"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/kafkasink/kafkasink/internal/topicroute"
)

// Sink delivers batches of change events to Kafka. New makes one.
//
// Write is not safe for concurrent use: a Write called while another runs
// returns ErrConcurrentWrite. Checkpoint and Close are safe to call from any
// goroutine.
//
// Inside, it is what every delivery mode shares (configuration, the
// client, topics, the checkpoint and its state, the write guard, and the
// steps of a Write around the mode's own) and the mode.
type Sink struct {
	mode  mode // ExactlyOnce's txnSink or the other modes' producerSink
	cfg   Config
	log   *slog.Logger
	hooks hooks
	// counters are what Stats reports; they are the first of hooks.
	counters counters
	topics   *topicadmin.Cache

	// sem admits one Write at a time; Close takes it too, to wait for a
	// running Write.
	sem    chan struct{}
	closed atomic.Bool

	// Touched only while holding sem (or during New). The client is
	// made by New and closed by Close; a running sink replaces it only
	// when it claims its transactional id afresh (txnSink.claimAfresh).
	cl *kgo.Client
	// adm is the admin client of cl; atomic, for Ping.
	adm   atomic.Pointer[kadm.Client]
	store checkpointStore
	// state is the checkpoint and its state, the open transaction and
	// the fatal error (state.go).
	state sinkState
	// owed is what the last Write that failed retryably left
	// undelivered, as far as the checkpoint then knew, for
	// checkRedelivery; zero when nothing is owed.
	owed owedEvents
	// routes caches each table's route.
	routes map[[2]string]tableRoute
	// routing is the memory of a plan's routes (see resolve).
	routing routing
	// spare is the memory of the last delivered batch's records, for
	// the next plan (see encoderState); nil after a failed Write, whose
	// records the client may still hold.
	spare *encoderState
	// router names each table's topic.
	router *topicroute.Router
	// clientClosed closes the client once.
	clientClosed sync.Once

	// frameTopic is frameTopic(cfg.Encoder).
	frameTopic string
}

// mode is what differs between the delivery modes, one file each:
// txnSink (eos.go) for ExactlyOnce, producerSink (producer.go) for
// Idempotent and Plain. Sink calls it at two points.
type mode interface {
	// writeBatch plans b and delivers it; it returns the plan, without
	// parts when everything was delivered before, and the transactions
	// (or checkpointed parts) it wrote.
	writeBatch(ctx context.Context, b *Batch) (p *plan, n int, err error)
	// settleClient ends whatever the client may still have open after an
	// unclear outcome, before recovery reads the checkpoint back.
	settleClient(ctx context.Context) error
	// finish checks, before Close closes the client, what the last Write
	// left to check: a loss it finds is Close's error.
	finish(ctx context.Context) error
}

// Delivers reports whether Write writes e to its table's topic: false for
// an event the Encoder leaves out (a RecordShaper's Skip). A source
// counting the events of a transaction (Event.Txn) asks it, as pgcdc's Run
// does. Safe for concurrent use.
func (s *Sink) Delivers(e *Event) bool {
	sh, ok := s.cfg.Encoder.(RecordShaper)
	return !ok || e.Record != nil || !sh.Shape(e).Skip
}

// New starts a sink: it checks cfg, connects, prepares the checkpoint
// topic, fences any predecessor with the same transactional id (ExactlyOnce),
// and reads the checkpoint back. ctx bounds the start-up only.
//
// Configuration problems are returned together as one *ConfigError.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Sink{
		cfg:    cfg,
		log:    cfg.Logger.With("sink", cfg.SinkID),
		topics: topicadmin.NewCache(cfg.Topics.creation()),
		sem:    make(chan struct{}, 1),
		routes: make(map[[2]string]tableRoute),
		store:  checkpointStore{Partition: checkpointlog.Partition{Topic: cfg.CheckpointTopic}, sinkID: cfg.SinkID, mode: cfg.Mode},
	}
	b.hooks = newHooks(append([]Hook{&b.counters}, cfg.Hooks...))
	b.router = newRouter(&b.cfg)
	b.frameTopic = frameTopic(cfg.Encoder)
	if cfg.Mode == ExactlyOnce {
		b.store.txnID = cfg.TransactionalID
		b.mode = &txnSink{sink: b}
	} else {
		b.mode = &producerSink{sink: b}
	}
	cl, err := kgo.NewClient(b.producerOptions()...)
	if err != nil {
		return nil, &ConfigError{Problems: []string{"Kafka client: " + err.Error()}}
	}
	b.useClient(cl)
	if err := b.start(ctx); err != nil {
		cl.Close()
		return nil, cfg.explainConnectErr(classified(ctx, err))
	}
	return b, nil
}

// start prepares the checkpoint topic, claims the transactional id
// (ExactlyOnce), which fences every predecessor, and reads the
// checkpoint: the protocol's start-up, run once, by New.
func (s *Sink) start(ctx context.Context) error {
	var err error
	if s.store.Partition.Partition, err = setupCheckpointTopic(ctx, s.cl, s.cfg.CheckpointTopic, s.cfg.SinkID, s.cfg.Mode, s.logInfo); err != nil {
		return err
	}
	if s.cfg.Mode == ExactlyOnce {
		// Initialising the producer id of a new client claims the
		// transactional id: it fences every predecessor and makes
		// the broker finish its open transaction, so the read below
		// sees its outcome.
		if _, _, err := s.cl.ProducerID(ctx); err != nil {
			return s.classifyInitErr(err)
		}
	}
	_, ck, err := s.state.readBack(ctx, &s.store, s.adm.Load(), s.connOptions())
	if err != nil {
		return err
	}
	s.state.verified(ck)
	s.log.Info("sink started", "mode", s.cfg.Mode.String(), "checkpoint", ck.Position.String(),
		"checkpoint_topic", s.cfg.CheckpointTopic, "checkpoint_partition", s.store.Partition.Partition)
	return nil
}

// classifyInitErr explains the producer id errors a user can fix.
func (s *Sink) classifyInitErr(err error) error {
	switch {
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return &ConfigError{Problems: []string{fmt.Sprintf("TransactionTimeout %v is above the broker's transaction.max.timeout.ms: lower it, or raise the broker setting (%v)", s.cfg.TransactionTimeout, err)}}
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("kafkasink: not authorised to use transactional id %q: grant WRITE and DESCRIBE on TransactionalId %q to the sink's principal: %w", s.cfg.TransactionalID, s.cfg.TransactionalID, err)
	}
	return fmt.Errorf("kafkasink: initialising producer id for transactional id %q: %w", s.cfg.TransactionalID, err)
}

func (s *Sink) logInfo(msg string, args ...any) { s.log.Info(msg, args...) }

// Write delivers b. When it returns nil, every event of b is durably in
// Kafka (acks=all) and the checkpoint has moved to b's last event, with b's
// cursor: the caller may acknowledge its source. Events at or below the
// checkpoint were delivered before and are skipped.
//
// When it returns an error, what is visible depends on the mode: in
// ExactlyOnce mode nothing of an unfinished transaction is visible to
// read_committed consumers, and the next Write of the same batch writes
// only what the checkpoint does not cover. A cancelled ctx during a commit
// leaves its outcome unknown to the caller; the sink resolves it by
// reading its checkpoint back on the next Write. Classify errors with
// IsRetryable, IsFatal and IsRejected.
//
// Around the mode's writeBatch, which plans b and delivers it, it runs the
// steps every mode shares: admitting one Write, checking the batch,
// recovering an unverified checkpoint, holding the caller to what a failed
// Write owes, giving the error its class, and reporting.
func (s *Sink) Write(ctx context.Context, batch Batch) (err error) {
	b := &batch
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if len(b.Events) == 0 && b.Cursor == nil {
		return nil
	}
	defer func() { err = s.settle(ctx, b, err) }()
	if err := checkBatch(b); err != nil {
		return err
	}
	if err := s.recoverIfUnverified(ctx); err != nil {
		return err
	}
	if err := s.checkRedelivery(b); err != nil {
		return err
	}
	started := time.Now()
	p, n, err := s.mode.writeBatch(ctx, b)
	if err != nil {
		return err
	}
	defer s.reuse(p)
	if len(p.parts) == 0 {
		return nil
	}
	info := BatchInfo{Events: p.events, Skipped: p.skipped, Written: p.written(), Rejected: p.rejected,
		Transactions: n, Duration: time.Since(started), Checkpoint: s.Checkpoint(), Receipts: s.receipts(p)}
	for i := range p.parts {
		info.Records += len(p.parts[i].records)
		info.Bytes += p.parts[i].bytes
	}
	s.hooks.onBatch(info)
	s.log.Debug("batch written", "events", info.Events, "skipped", info.Skipped, "rejected", info.Rejected,
		"transactions", n, "checkpoint", info.Checkpoint.Position.String(), "duration", info.Duration)
	s.logReceipts(ctx, info.Receipts)
	return nil
}

// enter admits one Write, or says why not.
func (s *Sink) enter() error {
	if s.closed.Load() {
		return ErrClosed
	}
	select {
	case s.sem <- struct{}{}:
	default:
		return ErrConcurrentWrite
	}
	if s.closed.Load() {
		<-s.sem
		return ErrClosed
	}
	if err := s.state.stopped(); err != nil {
		<-s.sem
		return err
	}
	return nil
}

// exit ends a Write. A Close that gave up waiting for it left the client
// for the Write to close.
func (s *Sink) exit() {
	if s.closed.Load() {
		s.closeClient()
	}
	<-s.sem
}

// settle ends a Write: it gives err exactly one class (see classified),
// marks the checkpoint unverified after anything that may have reached
// the broker, and remembers what a retryable failure left undelivered, so
// that checkRedelivery can hold the caller to writing it again.
func (s *Sink) settle(ctx context.Context, b *Batch, err error) error {
	err = classified(ctx, err)
	if err == nil || IsFatal(err) {
		return err
	}
	if _, rejected := IsRejected(err); rejected {
		// Nothing was sent but, in ExactlyOnce mode, an early
		// transaction that was aborted; the caller may fix or drop
		// the rejected events, so nothing is owed.
		return err
	}
	err = s.follow(verdict{err, actRecover})
	if s.owed.first.IsZero() {
		ck := s.Checkpoint().Position
		for i := range b.Events {
			if p := b.Events[i].Position; p.Compare(ck) > 0 {
				s.owed = owedEvents{first: p, last: b.Events[len(b.Events)-1].Position}
				break
			}
		}
	}
	return err
}

// owedEvents are the positions of a failed Write's events above the
// checkpoint as it stood when the Write failed.
type owedEvents struct {
	first, last Position
}

// recoverIfUnverified is recovery, and its one entry point: it makes an
// unverified checkpoint verified again, and does nothing to a verified
// one. The mode first ends whatever the client may have open
// (settleClient, which in ExactlyOnce mode keeps the producer identity).
// Then it reads the checkpoint back.
//
// What the read may show is known: the checkpoint in memory, or the one in
// flight. Anything else was written by another instance with the same sink
// id (or is an operator's reset), which makes this one a zombie: ErrFenced.
func (s *Sink) recoverIfUnverified(ctx context.Context) error {
	if !s.state.unverified() {
		return nil
	}
	// Bounded, so that a broker that does not answer makes Write
	// return a retryable error rather than hang to the caller's end.
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.TransactionTimeout, errRecoveryTimeout)
	defer cancel()
	if err := s.mode.settleClient(ctx); err != nil {
		return err
	}
	known, ck, err := s.state.readBack(ctx, &s.store, s.adm.Load(), s.connOptions())
	if errors.Is(err, ErrCheckpoint) {
		return s.follow(verdict{err, actFatal})
	}
	if err != nil {
		return ctxerr.WithCause(ctx, err)
	}
	if !s.state.knows(ck) {
		return s.follow(verdict{fmt.Errorf("%w: checkpoint topic %q holds checkpoint %s of sink id %q, which this instance did not write (it last wrote %s): another instance with the same sink id is writing, or an operator reset the checkpoint; restart the sink (New) to resume from what is there",
			ErrFenced, s.cfg.CheckpointTopic, ck.Position, s.cfg.SinkID, known.Position), actFatal})
	}
	s.state.verified(ck)
	s.log.Info("checkpoint read back", "checkpoint", ck.Position.String())
	return nil
}

// guard asks Config.Guard whether this instance may still send requests
// under its transactional id; a refusal stops the sink as fenced.
func (s *Sink) guard() error {
	if s.cfg.Guard == nil {
		return nil
	}
	if err := s.cfg.Guard(); err != nil {
		return s.follow(verdict{fmt.Errorf("%w: Config.Guard refused to let this instance go on (%w); it sent nothing more under transactional id %q",
			ErrFenced, err, s.cfg.TransactionalID), actFatal})
	}
	return nil
}

// follow acts on a verdict as its failureAction says: it is the one place
// where a failure changes the sink's state. The claim of actClaimAfresh is
// the mode's to make (txnSink.settleFencing), before recovery reads the
// checkpoint back.
func (s *Sink) follow(v verdict) error {
	switch v.action {
	case actRecover, actClaimAfresh:
		s.state.unclear()
	case actFatal:
		s.state.stop(v.err)
		s.log.Error("this sink stops", "error", v.err)
	}
	return v.err
}

// checkRedelivery refuses a batch that would move past the events of a
// Write that failed retryably without writing them first. A caller that
// moved on to its next batch would otherwise lose the failed one for good:
// when its source redelivers it later, it sits below the checkpoint and is
// skipped as already delivered. It runs on a verified checkpoint, which
// may show that part of the failed Write was committed after all: then
// the batch may start anywhere up to the failed Write's last event.
func (s *Sink) checkRedelivery(b *Batch) error {
	ck := s.Checkpoint().Position
	if s.owed.first.IsZero() || s.owed.last.Compare(ck) <= 0 {
		s.owed = owedEvents{}
		return nil
	}
	limit := s.owed.first
	if limit.Compare(ck) <= 0 {
		limit = s.owed.last
	}
	for i := range b.Events {
		p := b.Events[i].Position
		switch {
		case p.Compare(ck) <= 0:
			continue // delivered before
		case p.Compare(limit) <= 0:
			return nil // it writes the failed events again
		}
		return skipsOwed(limit, "starts at "+p.String(), ck)
	}
	if len(b.Events) == 0 {
		return skipsOwed(limit, "moves only the cursor", ck)
	}
	return nil // every event is delivered already: nothing moves
}

// skipsOwed is checkRedelivery's refusal of a batch that, as what says,
// goes past the owed position.
func skipsOwed(owed Position, what string, ck Position) error {
	return fmt.Errorf("%w: a Write failed before delivering position %s, and this batch %s, past it: write the failed batch again until it succeeds (retry while IsRetryable), or restart the sink and resume from Checkpoint() %s",
		ErrInvalidBatch, owed, what, ck)
}

// Checkpoint returns the last delivered position and cursor: the one read
// from the checkpoint topic at start-up, then the one of the last
// successful Write. A source resumes after it.
func (s *Sink) Checkpoint() Checkpoint { return s.state.checkpoint() }

// ID returns the sink's id, Config.SinkID: the key of its checkpoint.
func (s *Sink) ID() string { return s.cfg.SinkID }

// Close releases the Kafka client. It waits for a running Write to return,
// or for ctx. It may be called more than once; later Writes return
// ErrClosed. In ExactlyOnce mode it first checks the transaction markers
// of the last Write, as the next Write would have (see ErrCheckpoint),
// waiting a few seconds at most: records of a committed transaction that
// the broker lost are Close's error.
func (s *Sink) Close(ctx context.Context) error {
	first := !s.closed.Swap(true)
	select {
	case s.sem <- struct{}{}:
		// Free: taken before looking at ctx, so a done ctx does not
		// leave an idle sink's client open.
	default:
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			// The running Write closes the client when it returns
			// (see exit); it commits or aborts its transaction first.
			return fmt.Errorf("kafkasink: Close: a Write is still running and will release the client when it returns: %w", context.Cause(ctx))
		}
	}
	var err error
	if first && s.state.stopped() == nil {
		err = s.mode.finish(ctx)
	}
	s.closeClient()
	<-s.sem
	if first {
		s.log.Info("sink closed")
	}
	return err
}

func (s *Sink) closeClient() {
	s.clientClosed.Do(func() { s.cl.Close() })
}

// useClient makes cl the sink's client.
func (s *Sink) useClient(cl *kgo.Client) {
	s.cl = cl
	s.adm.Store(kadm.NewClient(cl))
}
