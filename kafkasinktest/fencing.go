package kafkasinktest

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FenceLikeKafka makes the fake cluster answer a producer id
// re-initialisation the way a real broker does (KIP-588): once a producer
// claimed a transactional id afresh (InitProducerID without a producer id),
// a re-initialisation that carries an epoch in use before that claim, or
// one below the newest instance's, is answered PRODUCER_FENCED. kfake
// accepts any epoch not above its own, so there, and only there, an old
// instance's recovery would fence the newer one.
//
// Kafka 4.4 does one more thing before it answers so, which this emulates
// too: when the newest instance has a transaction open, the old instance's
// re-initialisation makes the coordinator abort it and bump the epoch
// (the old one is answered CONCURRENT_TRANSACTIONS first, then
// PRODUCER_FENCED). The newest instance's next produce is then refused
// INVALID_PRODUCER_EPOCH, its AddPartitionsToTxn PRODUCER_FENCED and its
// commit INVALID_TXN_STATE, until it re-initialises its producer id at its
// epoch (KIP-588: transaction version 1), which Kafka allows after its own
// bump, or aborts at that epoch (transaction version 2), which Kafka
// answers as a retry of its own abort; in kfake, either aborts the
// transaction then.
//
// It also refuses, as a real broker does, a transactional produce whose
// epoch is below the first one used since the latest claim: kfake adds the
// partition to the current producer's transaction before it checks the
// epoch, so an old instance's refused produce would leave the newer
// instance a transaction nobody ends, which kfake's timeout then aborts
// by bumping the newer instance's epoch.
//
// It tracks epochs from the requests that carry them: Produce (in the
// record batch header), AddPartitionsToTxn, EndTxn and InitProducerID.
func FenceLikeKafka(c *kfake.Cluster) {
	f := &fencer{
		claims: make(map[string]int), firstSeen: make(map[string]map[int16]int), firstSinceClaim: make(map[string]int16),
		open: make(map[string]int16), fenced: make(map[string]int16),
	}
	c.Fault(
		kfake.Fault{Count: -1, When: f.observe},
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TopLevel: true, Err: kerr.ProducerFenced, Count: -1, When: f.stale},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidProducerEpoch, Count: -1, When: f.staleProduce},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidProducerEpoch, Count: -1, When: f.fencedRequest},
		kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TopLevel: true, Err: kerr.InvalidTxnState, Count: -1, When: f.fencedRequest},
		kfake.Fault{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, Err: kerr.ProducerFenced, Count: -1, When: f.fencedRequest},
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
	// open is, per transactional id, the epoch of the newest instance's
	// transaction while one is open: a produce or AddPartitionsToTxn
	// carried it, and no EndTxn or InitProducerID has since.
	open map[string]int16
	// fenced is, per transactional id, the epoch of the newest instance's
	// transaction that an old instance's re-initialisation aborted, until
	// the newest instance re-initialises.
	fenced map[string]int16
}

// observe records fresh claims and the epochs requests carry; it never
// faults a request.
func (f *fencer) observe(req kmsg.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID == nil {
			return false
		}
		txnID := *r.TransactionalID
		if r.ProducerID < 0 {
			f.claims[txnID]++
			delete(f.firstSinceClaim, txnID)
			delete(f.open, txnID)
			delete(f.fenced, txnID)
			return false
		}
		if newest, ok := f.firstSinceClaim[txnID]; ok && r.ProducerEpoch >= newest {
			// The newest instance re-initialises: kfake aborts
			// its open transaction, as Kafka did already.
			delete(f.open, txnID)
			delete(f.fenced, txnID)
		}
	case *kmsg.EndTxnRequest:
		f.see(r.TransactionalID, r.ProducerEpoch)
		if fenced, ok := f.fenced[r.TransactionalID]; !ok || !r.Commit && fenced == r.ProducerEpoch {
			// Ended, or aborted at the fenced epoch: kfake aborts
			// it now, as Kafka did already.
			delete(f.open, r.TransactionalID)
			delete(f.fenced, r.TransactionalID)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		f.see(r.TransactionalID, r.ProducerEpoch)
		f.opens(r.TransactionalID, r.ProducerEpoch)
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil {
			return false
		}
		for _, epoch := range batchEpochs(r) {
			f.see(*r.TransactionID, epoch)
			f.opens(*r.TransactionID, epoch)
		}
	}
	return false
}

// opens records that a request of epoch adds to a transaction: the newest
// instance's, when epoch is not below its first.
func (f *fencer) opens(txnID string, epoch int16) {
	if newest, ok := f.firstSinceClaim[txnID]; ok && epoch >= newest {
		f.open[txnID] = epoch
	}
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
// use before the latest fresh claim of its transactional id, or one below
// the newest instance's: an old instance may re-initialise with an epoch
// the broker gave it in a response (a re-initialisation's, or EndTxn's
// under transaction version 2) that no request carried before the claim.
// Kafka refuses both (it accepts only the current epoch, and the one
// before its own timeout bump); kfake accepts any epoch not above its own,
// and would let the old instance fence the newest.
func (f *fencer) stale(req kmsg.Request) bool {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID == nil || r.ProducerID < 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	txnID := *r.TransactionalID
	newest, claimed := f.firstSinceClaim[txnID]
	seen, ok := f.firstSeen[txnID][r.ProducerEpoch]
	if !(claimed && r.ProducerEpoch < newest) && !(ok && seen < f.claims[txnID]) {
		return false
	}
	if epoch, open := f.open[txnID]; open {
		f.fenced[txnID] = epoch
	}
	return true
}

// fencedRequest reports whether req carries the epoch of the newest
// instance's transaction that an old instance's re-initialisation aborted.
func (f *fencer) fencedRequest(req kmsg.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var txnID string
	var epochs []int16
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil {
			return false
		}
		txnID, epochs = *r.TransactionID, batchEpochs(r)
	case *kmsg.EndTxnRequest:
		if !r.Commit {
			return false // observe let the abort through
		}
		txnID, epochs = r.TransactionalID, []int16{r.ProducerEpoch}
	case *kmsg.AddPartitionsToTxnRequest:
		txnID, epochs = r.TransactionalID, []int16{r.ProducerEpoch}
	}
	fenced, ok := f.fenced[txnID]
	return ok && slices.Contains(epochs, fenced)
}
