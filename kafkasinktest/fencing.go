package kafkasinktest

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
// It also refuses, as a real broker does, a transactional produce whose
// epoch is below the first one used since the latest claim: kfake adds the
// partition to the current producer's transaction before it checks the
// epoch, so an old instance's refused produce would leave the newer
// instance a transaction nobody ends, which kfake's timeout then aborts
// by bumping the newer instance's epoch.
//
// It tracks epochs from the requests that carry them: Produce (in the
// record batch header), EndTxn and InitProducerID.
func FenceLikeKafka(c *kfake.Cluster) {
	f := &fencer{claims: make(map[string]int), firstSeen: make(map[string]map[int16]int), firstSinceClaim: make(map[string]int16)}
	c.Fault(
		kfake.Fault{Count: -1, When: f.observe},
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TopLevel: true, Err: kerr.ProducerFenced, Count: -1, When: f.stale},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidProducerEpoch, Count: -1, When: f.staleProduce},
	)
}

type fencer struct {
	mu sync.Mutex
	// claims counts the fresh claims of each transactional id.
	claims map[string]int
	// firstSeen is, per transactional id and epoch, the claim count
	// when a request first carried that epoch.
	firstSeen map[string]map[int16]int
	// firstSinceClaim is, per transactional id, the first epoch a
	// request carried after the latest claim: the newest instance's.
	firstSinceClaim map[string]int16
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
			delete(f.firstSinceClaim, *r.TransactionalID)
		}
	case *kmsg.EndTxnRequest:
		f.see(r.TransactionalID, r.ProducerEpoch)
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil {
			return false
		}
		for _, epoch := range batchEpochs(r) {
			f.see(*r.TransactionID, epoch)
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
	if _, ok := f.firstSinceClaim[txnID]; !ok && f.claims[txnID] > 0 {
		f.firstSinceClaim[txnID] = epoch
	}
}

// batchEpochs returns the producer epoch of each record batch of r. A
// record batch header holds it at byte 51 (after base offset, length,
// leader epoch, magic, crc, attributes, last offset delta, two timestamps
// and the producer id).
func batchEpochs(r *kmsg.ProduceRequest) []int16 {
	var out []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if len(p.Records) >= 53 {
				out = append(out, int16(binary.BigEndian.Uint16(p.Records[51:53])))
			}
		}
	}
	return out
}

// staleProduce reports whether a transactional produce carries an epoch
// below the newest instance's.
func (f *fencer) staleProduce(req kmsg.Request) bool {
	r := req.(*kmsg.ProduceRequest)
	if r.TransactionID == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	newest, ok := f.firstSinceClaim[*r.TransactionID]
	if !ok {
		return false
	}
	for _, epoch := range batchEpochs(r) {
		if epoch < newest {
			return true
		}
	}
	return false
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
