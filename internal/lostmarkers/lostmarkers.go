// Package lostmarkers makes a kfake cluster lose the commit markers of a
// transaction on one partition, as Kafka 4.4's transaction coordinator
// was seen to do when the partition had no leader for a moment: it
// answers the commit, writes the COMMIT markers to the transaction's
// other partitions, and never to that one, whose records stay pending.
//
// kfake writes every marker inside EndTxn. The emulation answers a chosen
// EndTxn(commit) itself instead and, before answering, sends kfake the
// WriteTxnMarkers requests of a coordinator for every partition of the
// transaction but one. It needs transaction version 1 (EndTxn below v5,
// explicit AddPartitionsToTxn, which is how it learns the partitions):
// give the producing client ClientOptions.
//
// How the fake then differs from Kafka, which matters for what a test
// may conclude:
//   - kfake still holds the transaction open (its coordinator never ended
//     it), so the producer's next transaction joins it: its EndTxn ends
//     the pending records of the skipped partition with its own outcome
//     whether or not it wrote to that partition. Kafka's coordinator
//     considers the transaction complete: only a later transaction that
//     writes to the partition ends the pending records there, and until
//     then they hang (kafka-transactions.sh --find-hanging lists them).
//   - kfake's transaction timeout keeps running from the skipped
//     transaction's start and aborts it (the pending records with it);
//     Kafka never times it out. An InitProducerId for the transactional
//     id likewise aborts it in kfake and leaves it hanging in Kafka.
//
// On both, an abort that ends the pending records takes them, which is
// the loss this package exists to reproduce.
package lostmarkers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ClientOptions are the options the producing client needs for the
// emulation: transaction version 1.
func ClientOptions() []kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	return []kgo.Opt{kgo.MaxVersions(v)}
}

// Partition names one partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%s[%d]", p.Topic, p.Partition) }

// Skip is one commit whose markers were not written to Partition.
type Skip struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Partition       Partition
}

// Pick chooses, for a commit of transactional id txnID that wrote parts
// (in the order they were added), the partition whose markers to skip;
// false skips none. It runs inside the cluster's request loop: it must
// be quick and must not call the cluster.
type Pick func(txnID string, parts []Partition) (Partition, bool)

// Skipper is the emulation installed on one cluster. Safe for concurrent
// use.
type Skipper struct {
	c    *kfake.Cluster
	cl   *kgo.Client
	pick Pick

	mu    sync.Mutex
	parts map[string][]Partition // of each transactional id's open transaction
	// open is the transactional id whose skipped transaction kfake
	// still holds open: its next EndTxn goes to kfake, which ends the
	// pending records with it.
	open    map[string]bool
	skipped []Skip
	errs    []error
}

// Install installs the emulation on c; pick chooses the commits and
// partitions. Close it before the cluster.
func Install(c *kfake.Cluster, pick Pick) (*Skipper, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	s := &Skipper{c: c, cl: cl, pick: pick, parts: make(map[string][]Partition), open: make(map[string]bool)}
	c.ControlKey(int16(kmsg.AddPartitionsToTxn), s.added)
	c.ControlKey(int16(kmsg.EndTxn), s.end)
	return s, nil
}

// Close releases the client that writes the markers.
func (s *Skipper) Close() { s.cl.Close() }

// Skipped returns the commits whose markers were skipped so far.
func (s *Skipper) Skipped() []Skip {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Skip(nil), s.skipped...)
}

// Errors returns what went wrong writing the other partitions' markers:
// a test that gets any cannot trust the emulation.
func (s *Skipper) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// added records the partitions a transaction adds; kfake handles the
// request.
func (s *Skipper) added(r kmsg.Request) (kmsg.Response, error, bool) {
	s.c.KeepControl()
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			s.parts[req.TransactionalID] = appendNew(s.parts[req.TransactionalID], Partition{t.Topic, p})
		}
	}
	return nil, nil, false
}

func appendNew(parts []Partition, p Partition) []Partition {
	for _, q := range parts {
		if q == p {
			return parts
		}
	}
	return append(parts, p)
}

// end answers a chosen commit itself, having written the markers of all
// of its partitions but the skipped one; any other EndTxn goes to kfake.
func (s *Skipper) end(r kmsg.Request) (kmsg.Response, error, bool) {
	s.c.KeepControl()
	req := r.(*kmsg.EndTxnRequest)
	s.mu.Lock()
	parts := s.parts[req.TransactionalID]
	delete(s.parts, req.TransactionalID)
	var skip Partition
	ok := false
	if req.Commit && !s.open[req.TransactionalID] {
		skip, ok = s.pick(req.TransactionalID, parts)
	}
	delete(s.open, req.TransactionalID)
	if ok {
		s.open[req.TransactionalID] = true
		s.skipped = append(s.skipped, Skip{req.TransactionalID, req.ProducerID, req.ProducerEpoch, skip})
	}
	s.mu.Unlock()
	if !ok {
		return nil, nil, false
	}
	var others []Partition
	for _, p := range parts {
		if p != skip {
			others = append(others, p)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.writeMarkers(req.ProducerID, req.ProducerEpoch, others); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	}()
	// The commit is answered once the markers are written, as a
	// coordinator would have them written before the next transaction
	// could begin on those partitions.
	s.c.SleepControl(func() { <-done })
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.SetVersion(req.GetVersion())
	return resp, nil, true
}

// writeMarkers sends each partition's leader the COMMIT markers of the
// producer's transaction, as a coordinator does.
func (s *Skipper) writeMarkers(pid int64, epoch int16, parts []Partition) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byLeader := make(map[int32][]Partition)
	for _, p := range parts {
		l := s.c.LeaderFor(p.Topic, p.Partition)
		if l < 0 {
			return fmt.Errorf("lostmarkers: %s has no leader", p)
		}
		byLeader[l] = append(byLeader[l], p)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, s.cl); err != nil {
		return fmt.Errorf("lostmarkers: loading brokers: %w", err)
	}
	for leader, ps := range byLeader {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, true
		at := make(map[string]int)
		for _, p := range ps {
			i, ok := at[p.Topic]
			if !ok {
				i = len(m.Topics)
				at[p.Topic] = i
				t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				t.Topic = p.Topic
				m.Topics = append(m.Topics, t)
			}
			m.Topics[i].Partitions = append(m.Topics[i].Partitions, p.Partition)
		}
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, s.cl.Broker(int(leader)))
		if err != nil {
			return fmt.Errorf("lostmarkers: WriteTxnMarkers to broker %d: %w", leader, err)
		}
		for _, rm := range resp.Markers {
			for _, t := range rm.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return fmt.Errorf("lostmarkers: WriteTxnMarkers %s[%d]: error code %d", t.Topic, p.Partition, p.ErrorCode)
					}
				}
			}
		}
	}
	return nil
}
