package kafkasink_test

import (
	"context"
	"net"
	"sync"
	"syscall"
)

// links dials the broker connections of one sink instance, so that the
// checker can cut them all at once and refuse new ones, as a process
// whose host dropped off the network sees it.
type links struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// dial is the instance's kgo.Dialer.
func (l *links) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if l.isCut() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	l.conns = append(l.conns, c)
	return c, nil
}

func (l *links) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// cutAll closes every connection and refuses every later dial.
func (l *links) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}
