package pgcdc

import "sync"

// inbox carries the replication stream's messages from the goroutine that
// reads the connection to the pump. The reader appends under a lock and
// signals; the pump takes everything waiting at once. At a few hundred
// thousand messages a second, a channel operation per message, and the
// pump's select per message, cost more CPU than decoding them did.
//
// Messages are copied into shared arenas rather than allocated one by one:
// the connection reuses its buffer, and the decoder keeps nothing of a
// message, so an arena is garbage once the pump is done with its messages.
type inbox struct {
	mu    sync.Mutex
	msgs  [][]byte
	size  int           // bytes in msgs
	ready chan struct{} // capacity 1: messages are waiting
	taken chan struct{} // capacity 1: the pump took messages, so there is room

	arena []byte // the reader's current arena
}

// The inbox holds at most this much; the reader then waits, and the server
// is held back by TCP flow control. One message is always let in, however
// large.
const (
	inboxMaxMessages = 4096
	inboxMaxBytes    = 4 << 20
	inboxArenaSize   = 256 << 10
)

func newInbox() *inbox {
	return &inbox{ready: make(chan struct{}, 1), taken: make(chan struct{}, 1)}
}

// put adds a copy of data, waiting while the inbox is full. It reports
// false if done closed first.
func (in *inbox) put(data []byte, done <-chan struct{}) bool {
	msg := in.copy(data)
	for {
		in.mu.Lock()
		if len(in.msgs) == 0 || (len(in.msgs) < inboxMaxMessages && in.size+len(msg) <= inboxMaxBytes) {
			in.msgs = append(in.msgs, msg)
			in.size += len(msg)
			in.mu.Unlock()
			select {
			case in.ready <- struct{}{}:
			default: // already signalled
			}
			return true
		}
		in.mu.Unlock()
		select {
		case <-in.taken:
		case <-done:
			return false
		}
	}
}

// copy copies data into the current arena, starting a new one when it does
// not fit.
func (in *inbox) copy(data []byte) []byte {
	if len(data) > cap(in.arena)-len(in.arena) {
		in.arena = make([]byte, 0, max(inboxArenaSize, len(data)))
	}
	start := len(in.arena)
	in.arena = append(in.arena, data...)
	return in.arena[start:len(in.arena):len(in.arena)]
}

// take returns every waiting message, in order. prev, the slice the last
// take returned, is reused once its messages are handled.
func (in *inbox) take(prev [][]byte) [][]byte {
	clear(prev) // let go of the arenas it points into
	in.mu.Lock()
	msgs := in.msgs
	in.msgs, in.size = prev[:0], 0
	in.mu.Unlock()
	select {
	case in.taken <- struct{}{}:
	default:
	}
	return msgs
}
