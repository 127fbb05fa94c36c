// Package ctxerr tells a deadline the sink set itself from the caller's:
// Timeout is the cause the sink gives its own deadlines
// (context.WithTimeoutCause), and WithCause adds a context's cause to the
// error its end caused. The sink classifies a Timeout as retryable, and
// the caller's own context ending as in no class.
package ctxerr

import (
	"context"
	"errors"
	"fmt"
)

// Timeout is the cause of a deadline the sink sets itself. Unlike the
// caller's own context ending, it is retryable.
type Timeout struct{ What string }

func (e *Timeout) Error() string { return "kafkasink: " + e.What + " timed out" }

// WithCause adds the cause of ctx to err when ctx ending caused err, so
// that a deadline the sink set itself is told from the caller's.
func WithCause(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || context.Cause(ctx) == ctx.Err() {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return err
}
