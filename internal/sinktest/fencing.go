package sinktest

import (
	"encoding/binary"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FenceLikeKafka makes the fake cluster answer a producer id
// re-initialisation the way a real broker does (KIP-588): once a producer
// claimed a transactional id afresh (InitProducerID without a producer id),
// a re-initialisation that carries an epoch in use before that claim is
// answered PRODUCER_FENCED. kfake accepts any epoch not above its own, so
// there, and only there, an old instance's recovery would fence the newer
// one.
//
// It tracks epochs from the requests that carry them: Produce (in the
// record batch header), EndTxn and InitProducerID.
func FenceLikeKafka(c *kfake.Cluster) {
	f := &fencer{claims: make(map[string]int), firstSeen: make(map[string]map[int16]int)}
	c.Fault(
		kfake.Fault{Count: -1, When: f.observe},
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TopLevel: true, Err: kerr.ProducerFenced, Count: -1, When: f.stale},
	)
}

type fencer struct {
	mu sync.Mutex
	// claims counts the fresh claims of each transactional id.
	claims map[string]int
	// firstSeen is, per transactional id and epoch, the claim count
	// when a request first carried that epoch.
	firstSeen map[string]map[int16]int
}

// observe records fresh claims and the epochs requests carry; it never
// faults a request.
func (f *fencer) observe(req kmsg.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil && r.ProducerID < 0 {
			f.claims[*r.TransactionalID]++
		}
	case *kmsg.EndTxnRequest:
		f.see(r.TransactionalID, r.ProducerEpoch)
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil {
			return false
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				// A record batch header holds the producer
				// epoch at byte 51 (after base offset, length,
				// leader epoch, magic, crc, attributes, last
				// offset delta, two timestamps, producer id).
				if len(p.Records) >= 53 {
					f.see(*r.TransactionID, int16(binary.BigEndian.Uint16(p.Records[51:53])))
				}
			}
		}
	}
	return false
}

func (f *fencer) see(txnID string, epoch int16) {
	m := f.firstSeen[txnID]
	if m == nil {
		m = make(map[int16]int)
		f.firstSeen[txnID] = m
	}
	if _, ok := m[epoch]; !ok {
		m[epoch] = f.claims[txnID]
	}
}

// stale reports whether a re-initialisation carries an epoch that was in
// use before the latest fresh claim of its transactional id.
func (f *fencer) stale(req kmsg.Request) bool {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID == nil || r.ProducerID < 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen, ok := f.firstSeen[*r.TransactionalID][r.ProducerEpoch]
	return ok && seen < f.claims[*r.TransactionalID]
}
