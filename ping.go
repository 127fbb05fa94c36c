package kafkasink

import (
	"context"
	"fmt"
)

// Ping reports whether the sink can go on writing, for health checks: it
// is not closed, no fatal error has stopped it (fencing, an unusable
// checkpoint; Ping returns that error), and the leader of its checkpoint
// partition answers. It is safe to call from any goroutine, also while a
// Write runs, and neither waits for a Write nor changes anything a Write
// uses.
//
// A newer instance that claimed the same transactional id fences this one
// at the broker at once, but this instance learns it from the broker's
// answer to its next transaction or recovery: until then Ping reports
// nothing of it. The newer instance's writes are safe either way.
func (s *Sink) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.state.stopped(); err != nil {
		return err
	}
	if _, err := s.store.End(ctx, s.adm.Load()); err != nil {
		return classified(ctx, fmt.Errorf("kafkasink: Ping: %w", err))
	}
	return nil
}
