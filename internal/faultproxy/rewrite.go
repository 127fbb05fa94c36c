package faultproxy

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// endpoint is a host and port as Kafka responses carry them.
type endpoint struct {
	host string
	port int32
}

func (e endpoint) String() string { return net.JoinHostPort(e.host, strconv.Itoa(int(e.port))) }

func parseEndpoint(addr string) (endpoint, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return endpoint{}, fmt.Errorf("port of %s: %w", addr, err)
	}
	return endpoint{host: host, port: int32(p)}, nil
}

// addressMap maps each broker's endpoint to its proxy's.
type addressMap map[endpoint]endpoint

// swap replaces *host and *port with the proxy's. An empty host or a
// negative port means "no broker" (FindCoordinator's answer on an error)
// and stays. A broker no proxy fronts is an error: the client would go
// around the proxies.
func (m addressMap) swap(host *string, port *int32) error {
	if *host == "" || *port < 0 {
		return nil
	}
	to, ok := m[endpoint{*host, *port}]
	if !ok {
		return fmt.Errorf("broker %s has no proxy: a client would reach it directly", endpoint{*host, *port})
	}
	*host, *port = to.host, to.port
	return nil
}

// rewritesAddresses reports whether responses of key name brokers.
func rewritesAddresses(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Produce, // KIP-951 leader hints, v10+
		kmsg.Fetch, // KIP-951 leader hints, v16+
		kmsg.Metadata,
		kmsg.FindCoordinator,
		kmsg.DescribeCluster:
		return true
	}
	return false
}

// rewrite returns the response frame (correlation id, header tags, body) to
// request key at version with every broker address replaced by its proxy's.
// A frame that names no broker comes back as it was.
func (m addressMap) rewrite(key, version int16, frame []byte) ([]byte, error) {
	if !rewritesAddresses(key) {
		return frame, nil
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	d := decoder{b: frame}
	d.int32() // correlation id
	if resp.IsFlexible() {
		d.skipTags() // response header v1; none of these keys is ApiVersions
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s v%d response header: %w", kmsg.NameForKey(key), version, d.err)
	}
	header := frame[:len(frame)-len(d.b)]
	if err := resp.ReadFrom(d.b); err != nil {
		return nil, fmt.Errorf("decoding %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	var swaps []struct {
		host *string
		port *int32
	}
	add := func(host *string, port *int32) {
		swaps = append(swaps, struct {
			host *string
			port *int32
		}{host, port})
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			add(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			add(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			add(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		add(&r.Host, &r.Port)
		for i := range r.Coordinators {
			add(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			add(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
	if len(swaps) == 0 {
		return frame, nil // most Produce and Fetch responses
	}
	for _, s := range swaps {
		if err := m.swap(s.host, s.port); err != nil {
			return nil, fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(key), version, err)
		}
	}
	return resp.AppendTo(append([]byte(nil), header...)), nil
}
