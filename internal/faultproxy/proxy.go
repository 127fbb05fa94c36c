package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialTimeout bounds connecting to a broker. A stopped (SIGSTOP) broker
// still accepts connections in its kernel backlog; a killed one refuses
// them at once.
const dialTimeout = 5 * time.Second

// Proxies fronts a set of brokers, one proxy each, and records the faults
// they apply. Safe for concurrent use.
type Proxies struct {
	decide  Decide
	addrs   addressMap
	proxies []*proxy

	mu      sync.Mutex
	journal []Applied
	errs    []error
	closed  bool
	conns   map[*conn]struct{}
	wg      sync.WaitGroup
	counted map[Count]int
}

// Start starts one proxy on 127.0.0.1 for each broker of upstreams
// (host:port, exactly as the brokers advertise themselves in Metadata) and
// returns once all listen. decide chooses the fault for every request; nil
// passes everything.
func Start(upstreams []string, decide Decide) (*Proxies, error) {
	if decide == nil {
		decide = func(Request) Fault { return Fault{} }
	}
	g := &Proxies{decide: decide, addrs: make(addressMap), conns: make(map[*conn]struct{}), counted: make(map[Count]int)}
	for _, up := range upstreams {
		from, err := parseEndpoint(up)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("faultproxy: broker address %q: %w", up, err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("faultproxy: listening for %s: %w", up, err)
		}
		to, err := parseEndpoint(ln.Addr().String())
		if err != nil {
			ln.Close()
			g.Close()
			return nil, err
		}
		g.addrs[from] = to
		g.proxies = append(g.proxies, &proxy{group: g, upstream: up, ln: ln})
	}
	for _, p := range g.proxies {
		g.wg.Go(p.accept)
	}
	return g, nil
}

// Addrs returns the proxies' addresses, in the order of Start's upstreams:
// the seed brokers to give a client.
func (g *Proxies) Addrs() []string {
	out := make([]string, len(g.proxies))
	for i, p := range g.proxies {
		out[i] = p.ln.Addr().String()
	}
	return out
}

// Applied returns every fault applied so far, in order.
func (g *Proxies) Applied() []Applied {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Applied(nil), g.journal...)
}

// Counts returns how many faults of each kind were applied to each api.
func (g *Proxies) Counts() map[Count]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[Count]int, len(g.counted))
	for k, v := range g.counted {
		out[k] = v
	}
	return out
}

// Err returns what went wrong in the proxies themselves (a frame they could
// not read, a response naming a broker without a proxy), all joined; nil if
// nothing. A test should check it: such a connection was cut, which looks
// like a network fault but is the proxy's.
func (g *Proxies) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// Close stops listening and cuts every connection: to the client behind
// the proxies, the brokers are gone for good, as for a process whose
// network died. It waits for the proxies' goroutines to end.
func (g *Proxies) Close() {
	g.mu.Lock()
	g.closed = true
	conns := make([]*conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, p := range g.proxies {
		p.ln.Close()
	}
	for _, c := range conns {
		c.cut()
	}
	g.wg.Wait()
}

func (g *Proxies) record(req Request, f Fault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.journal = append(g.journal, Applied{At: time.Now(), Request: req, Fault: f})
	g.counted[Count{API: req.API(), Kind: f.Kind}]++
}

func (g *Proxies) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err)
}

// track registers c; false when the proxies are closed.
func (g *Proxies) track(c *conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *Proxies) untrack(c *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.conns, c)
}

// proxy fronts one broker.
type proxy struct {
	group    *Proxies
	upstream string
	ln       net.Listener
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.group.wg.Go(func() { p.serve(client) })
	}
}

// serve connects client to the broker and pipes both ways until either
// side closes or a fault cuts them.
func (p *proxy) serve(client net.Conn) {
	broker, err := net.DialTimeout("tcp", p.upstream, dialTimeout)
	if err != nil {
		client.Close() // the broker is down: so is the connection to it
		return
	}
	c := &conn{proxy: p, client: client, broker: broker, pending: make(chan requestHeader, 1024), done: make(chan struct{})}
	if !p.group.track(c) {
		c.cut()
		return
	}
	defer p.group.untrack(c)
	var wg sync.WaitGroup
	wg.Go(c.requests)
	wg.Go(c.responses)
	wg.Wait()
}

// conn is one client connection and its connection to the broker.
type conn struct {
	proxy   *proxy
	client  net.Conn
	broker  net.Conn
	pending chan requestHeader // requests awaiting a response, in order
	once    sync.Once
	done    chan struct{}
}

func (c *conn) cut() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.broker.Close()
	})
}

// sleep waits d, or less if the connection is cut; false if it was.
func (c *conn) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// requests forwards the client's requests, applying their faults.
func (c *conn) requests() {
	defer c.cut()
	g := c.proxy.group
	for {
		frame, err := readFrame(c.client)
		if err != nil {
			return
		}
		h, err := parseRequest(frame)
		if err != nil {
			g.fail(fmt.Errorf("faultproxy: request to %s: %w", c.proxy.upstream, err))
			return
		}
		h.Upstream = c.proxy.upstream
		f := g.decide(h.Request)
		if !h.expectsResponse && (f.Kind == DelayResponse || f.Kind == DropResponse) {
			f = Fault{} // no response to act on
		}
		switch f.Kind {
		case CutBefore:
			g.record(h.Request, f)
			return
		case DelayRequest:
			g.record(h.Request, f)
			if !c.sleep(f.Delay) {
				return
			}
		case CorruptRecords:
			if kmsg.Key(h.Key) == kmsg.Produce {
				if frame, err = corruptRecords(frame, h); err != nil {
					g.fail(fmt.Errorf("faultproxy: %s: %w", h.Request, err))
					return
				}
				g.record(h.Request, f)
			}
		}
		if h.expectsResponse {
			h.fault = f
			select {
			case c.pending <- h:
			case <-c.done:
				return
			}
		}
		if err := writeFrame(c.broker, frame); err != nil {
			return
		}
	}
}

// responses passes the broker's responses back, applying the faults of
// their requests and rewriting broker addresses.
func (c *conn) responses() {
	defer c.cut()
	g := c.proxy.group
	for {
		frame, err := readFrame(c.broker)
		if err != nil {
			return
		}
		var h requestHeader
		select {
		case h = <-c.pending:
		case <-c.done:
			return
		}
		id, err := responseCorrelationID(frame)
		if err == nil && id != h.CorrelationID {
			err = fmt.Errorf("response has correlation id %d, the oldest unanswered request (%s) has %d", id, h.Request, h.CorrelationID)
		}
		if err != nil {
			g.fail(fmt.Errorf("faultproxy: response from %s: %w", c.proxy.upstream, err))
			return
		}
		switch h.fault.Kind {
		case DropResponse:
			g.record(h.Request, h.fault)
			return
		case DelayResponse:
			g.record(h.Request, h.fault)
			if !c.sleep(h.fault.Delay) {
				return
			}
		}
		if frame, err = g.addrs.rewrite(h.Key, h.Version, frame); err != nil {
			g.fail(fmt.Errorf("faultproxy: response from %s to %s: %w", c.proxy.upstream, h.Request, err))
			return
		}
		if err := writeFrame(c.client, frame); err != nil {
			return
		}
	}
}
