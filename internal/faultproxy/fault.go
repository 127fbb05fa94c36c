// Package faultproxy is a fault-injecting TCP proxy for the Kafka protocol,
// for tests that run a client against real brokers and need the failures
// a network and a broker produce, at exact points of the protocol: a
// request that is delayed, a request the broker applied whose answer never
// arrives, a connection cut before a request left.
//
// Start runs one proxy per broker on 127.0.0.1. Each proxy reads the Kafka
// request header of every frame (length, api key, api version, correlation
// id, client id) and asks a Decide function what to do with the request;
// responses are matched to requests by correlation id, in order, as Kafka
// answers them on one connection. Responses that name brokers (Metadata,
// FindCoordinator, DescribeCluster, and Produce and Fetch with KIP-951
// leader hints) are rewritten to name the proxies instead, so a client
// seeded with the proxies' addresses never reaches a broker directly.
//
// Plaintext only: the proxy must read the frames.
package faultproxy

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kind is what a proxy does with one request.
type Kind uint8

const (
	// Pass forwards the request and its response untouched.
	Pass Kind = iota
	// DelayRequest holds the request for Fault.Delay before forwarding
	// it. Later requests on the same connection wait behind it, as they
	// would behind a stalled TCP stream.
	DelayRequest
	// DelayResponse holds the response for Fault.Delay before passing it
	// on; later responses on the connection wait behind it.
	DelayResponse
	// DropResponse forwards the request, waits for the broker's answer
	// (so the broker has applied the request), drops it and cuts the
	// connection: the client never learns the outcome. The key fault for
	// EndTxn, Produce, InitProducerID and AddPartitionsToTxn.
	DropResponse
	// CutBefore cuts the connection instead of forwarding the request:
	// the broker never sees it.
	CutBefore
	// CorruptRecords flips a byte of each record batch's CRC in a Produce
	// request before forwarding it: the broker refuses every batch,
	// CORRUPT_MESSAGE, without writing it, and franz-go fails a batch so
	// refused at once. It is how a test makes a real broker refuse a
	// retry for good. Requests other than Produce pass.
	CorruptRecords
)

// Kinds lists the fault kinds any request can take, Pass excluded.
var Kinds = []Kind{DelayRequest, DelayResponse, DropResponse, CutBefore}

func (k Kind) String() string {
	switch k {
	case Pass:
		return "pass"
	case DelayRequest:
		return "delay-request"
	case DelayResponse:
		return "delay-response"
	case DropResponse:
		return "drop-response"
	case CutBefore:
		return "cut-before"
	case CorruptRecords:
		return "corrupt-records"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Fault is the decision for one request. The zero value passes it.
type Fault struct {
	Kind  Kind
	Delay time.Duration // for DelayRequest and DelayResponse
}

func (f Fault) String() string {
	if f.Kind == DelayRequest || f.Kind == DelayResponse {
		return fmt.Sprintf("%s %v", f.Kind, f.Delay)
	}
	return f.Kind.String()
}

// Request is the header of one request as a proxy read it.
type Request struct {
	Upstream      string // the broker, host:port
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// API names the request's api key, as Kafka does ("EndTxn").
func (r Request) API() string { return kmsg.NameForKey(r.Key) }

func (r Request) String() string {
	return fmt.Sprintf("%s v%d correlation %d to %s", r.API(), r.Version, r.CorrelationID, r.Upstream)
}

// Decide chooses the fault for a request. Proxies call it for every request
// from many goroutines at once, so it must be safe for concurrent use. It
// runs before the request is forwarded and holds up the connection while it
// runs: it should be quick.
type Decide func(Request) Fault

// Applied is one fault a proxy applied.
type Applied struct {
	At      time.Time
	Request Request
	Fault   Fault
}

func (a Applied) String() string {
	return fmt.Sprintf("%s %s: %s", a.At.Format("15:04:05.000"), a.Request, a.Fault)
}

// Count keys the number of faults applied of one kind to one api.
type Count struct {
	API  string
	Kind Kind
}
