package faultproxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestFrame encodes req as a client sends it, without the size prefix:
// header v1 (or v2 with tags when flexible), then the body.
func requestFrame(req kmsg.Request, correlationID int32, clientID string) []byte {
	b := []byte{byte(req.Key() >> 8), byte(req.Key()), byte(req.GetVersion() >> 8), byte(req.GetVersion())}
	b = append(b, byte(correlationID>>24), byte(correlationID>>16), byte(correlationID>>8), byte(correlationID))
	b = append(b, byte(len(clientID)>>8), byte(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0) // no header tags
	}
	return req.AppendTo(b)
}

func TestParseRequestEveryProduceVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		for _, acks := range []int16{0, 1, -1} {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(v)
			req.Acks = acks
			txn := "txn-id"
			req.TransactionID = &txn
			h, err := parseRequest(requestFrame(req, 77, "client-x"))
			if err != nil {
				t.Fatalf("produce v%d acks %d: %v", v, acks, err)
			}
			if h.Key != kmsg.Produce.Int16() || h.Version != v || h.CorrelationID != 77 || h.ClientID != "client-x" {
				t.Errorf("produce v%d: header %+v", v, h.Request)
			}
			if want := acks != 0; h.expectsResponse != want {
				t.Errorf("produce v%d acks %d: expectsResponse %t, want %t", v, acks, h.expectsResponse, want)
			}
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(end.MaxVersion())
	h, err := parseRequest(requestFrame(end, -5, ""))
	if err != nil || h.Key != kmsg.EndTxn.Int16() || h.CorrelationID != -5 || !h.expectsResponse || h.API() != "EndTxn" {
		t.Errorf("EndTxn: %+v, %v", h, err)
	}
	if _, err := parseRequest([]byte{0, 26, 0}); err == nil {
		t.Error("a truncated header parsed")
	}
}

// TestRewriteEveryVersion encodes each response that names brokers at
// every version, rewrites it, decodes it again, and checks every address
// now names a proxy while everything else is unchanged.
func TestRewriteEveryVersion(t *testing.T) {
	m := addressMap{{"10.0.0.1", 9092}: {"127.0.0.1", 40001}, {"10.0.0.2", 9092}: {"127.0.0.1", 40002}}
	cases := []struct {
		resp  func() kmsg.Response
		addrs func(kmsg.Response) []endpoint // the addresses setAddr sets, in its order
	}{
		{
			resp: func() kmsg.Response {
				r := kmsg.NewPtrMetadataResponse()
				r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "10.0.0.1", Port: 9092}, {NodeID: 2, Host: "10.0.0.2", Port: 9092}}
				topic := "t"
				r.Topics = []kmsg.MetadataResponseTopic{{Topic: &topic, Partitions: []kmsg.MetadataResponseTopicPartition{{Leader: 2}}}}
				return r
			},
			addrs: func(r kmsg.Response) (out []endpoint) {
				for _, b := range r.(*kmsg.MetadataResponse).Brokers {
					out = append(out, endpoint{b.Host, b.Port})
				}
				return out
			},
		},
		{
			resp: func() kmsg.Response {
				r := kmsg.NewPtrFindCoordinatorResponse()
				r.NodeID, r.Host, r.Port = 2, "10.0.0.2", 9092
				r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{{Key: "k", NodeID: 1, Host: "10.0.0.1", Port: 9092}}
				return r
			},
			addrs: func(r kmsg.Response) (out []endpoint) {
				f := r.(*kmsg.FindCoordinatorResponse)
				if f.Version < 4 {
					return []endpoint{{f.Host, f.Port}}
				}
				for _, c := range f.Coordinators {
					out = append(out, endpoint{c.Host, c.Port})
				}
				return out
			},
		},
		{
			resp: func() kmsg.Response {
				r := kmsg.NewPtrDescribeClusterResponse()
				r.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 1, Host: "10.0.0.1", Port: 9092}}
				return r
			},
			addrs: func(r kmsg.Response) (out []endpoint) {
				for _, b := range r.(*kmsg.DescribeClusterResponse).Brokers {
					out = append(out, endpoint{b.Host, b.Port})
				}
				return out
			},
		},
		{
			resp: func() kmsg.Response {
				r := kmsg.NewPtrProduceResponse()
				r.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 6}}}}
				r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 2, Host: "10.0.0.2", Port: 9092}}
				return r
			},
			addrs: func(r kmsg.Response) (out []endpoint) {
				p := r.(*kmsg.ProduceResponse)
				for _, b := range p.Brokers {
					out = append(out, endpoint{b.Host, b.Port})
				}
				return out
			},
		},
		{
			resp: func() kmsg.Response {
				r := kmsg.NewPtrFetchResponse()
				r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "10.0.0.1", Port: 9092}}
				return r
			},
			addrs: func(r kmsg.Response) (out []endpoint) {
				for _, b := range r.(*kmsg.FetchResponse).Brokers {
					out = append(out, endpoint{b.Host, b.Port})
				}
				return out
			},
		},
	}
	for _, c := range cases {
		for v := int16(0); v <= c.resp().MaxVersion(); v++ {
			checkRewrite(t, m, c.resp, c.addrs, v)
		}
	}
	unknown := kmsg.NewPtrMetadataResponse()
	unknown.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 9, Host: "10.9.9.9", Port: 9092}}
	if _, err := m.rewrite(kmsg.Metadata.Int16(), 0, unknown.AppendTo([]byte{0, 0, 0, 1})); err == nil {
		t.Error("a broker without a proxy was let through")
	}
}

// checkRewrite encodes the response mk makes at version v, rewrites it
// with m, and checks that every address addrs reads now names its proxy
// while the rest of the frame is unchanged.
func checkRewrite(t *testing.T, m addressMap, mk func() kmsg.Response, addrs func(kmsg.Response) []endpoint, v int16) {
	t.Helper()
	resp := mk()
	resp.SetVersion(v)
	frame := []byte{0, 0, 1, 2} // correlation id 258
	if resp.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = resp.AppendTo(frame)
	out, err := m.rewrite(resp.Key(), v, frame)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(resp.Key()), v, err)
	}
	if id, _ := responseCorrelationID(out); id != 258 {
		t.Errorf("%s v%d: correlation id %d after the rewrite", kmsg.NameForKey(resp.Key()), v, id)
	}
	// What the version carries: fields of later versions are
	// not encoded.
	orig, _ := decodeResponse(t, resp.Key(), v, frame)
	back, body := decodeResponse(t, resp.Key(), v, out)
	before, after := addrs(orig), addrs(back)
	if len(before) != len(after) {
		t.Fatalf("%s v%d: %d addresses before, %d after", kmsg.NameForKey(resp.Key()), v, len(before), len(after))
	}
	for i := range before {
		if want := m[before[i]]; after[i] != want {
			t.Errorf("%s v%d: address %d is %v, want %v", kmsg.NameForKey(resp.Key()), v, i, after[i], want)
		}
	}
	// Nothing else changed: the rewritten response re-encoded
	// with the original addresses is the original frame.
	if len(before) > 0 {
		rest := out[:len(out)-len(body)]
		for i, a := range before {
			setAddr(back, i, a.host, a.port)
		}
		if got := string(back.AppendTo(append([]byte(nil), rest...))); got != string(frame) {
			t.Errorf("%s v%d: the rewrite changed more than the addresses", kmsg.NameForKey(resp.Key()), v)
		}
	}
}

// decodeResponse decodes a response frame, returning the response and its
// body.
func decodeResponse(t *testing.T, key, version int16, frame []byte) (kmsg.Response, []byte) {
	t.Helper()
	r := kmsg.ResponseForKey(key)
	r.SetVersion(version)
	body := frame[4:]
	if r.IsFlexible() {
		body = body[1:]
	}
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d: decoding: %v", kmsg.NameForKey(key), version, err)
	}
	return r, body
}

// setAddr sets the i-th address that TestRewriteEveryVersion's addrs
// functions read.
func setAddr(r kmsg.Response, i int, host string, port int32) {
	switch r := r.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers[i].Host, r.Brokers[i].Port = host, port
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			r.Host, r.Port = host, port
		} else {
			r.Coordinators[i].Host, r.Coordinators[i].Port = host, port
		}
	case *kmsg.DescribeClusterResponse:
		r.Brokers[i].Host, r.Brokers[i].Port = host, port
	case *kmsg.ProduceResponse:
		r.Brokers[i].Host, r.Brokers[i].Port = host, port
	case *kmsg.FetchResponse:
		r.Brokers[i].Host, r.Brokers[i].Port = host, port
	}
}
