// Package backoff is the exponential delay that every retry loop in
// kafkasink and pgcdc waits with, so that each loop states only what it
// retries and when it gives up.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a delay that doubles after each wait, up to a ceiling, with
// jitter: each wait is drawn at random from the upper half of its step,
// [step/2, step]. Without jitter, processes that failed together (two
// replicas waiting for the same lease, every client of a restarted server)
// retry together, in lockstep, for ever; drawing from the upper half
// spreads them by up to half a step while still halving the load of
// retries at least as fast as the steps double (a full jitter, [0, step],
// could retry at once). The zero value is not usable; use New. A Backoff
// belongs to one loop and is not safe for concurrent use.
type Backoff struct {
	first, max time.Duration
	step       time.Duration // the current step of the doubling schedule
	delay      time.Duration // the next wait, drawn from step
}

// New returns a Backoff whose first wait is drawn from the upper half of
// first and whose waits never exceed max.
func New(first, max time.Duration) *Backoff {
	b := &Backoff{first: first, max: max}
	b.Reset()
	return b
}

// Delay is how long the next Wait sleeps, for logging it beforehand.
func (b *Backoff) Delay() time.Duration { return b.delay }

// Wait sleeps for the current delay, then doubles the step up to the
// ceiling and draws the next delay from it. It returns false as soon as
// ctx ends, without waiting out the delay.
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.delay)
	defer t.Stop()
	b.step = min(2*b.step, b.max)
	b.delay = jitter(b.step)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reset makes the next wait the first one again, after progress.
func (b *Backoff) Reset() {
	b.step = min(b.first, b.max)
	b.delay = jitter(b.step)
}

// jitter draws a delay from [step - step/2, step] uniformly.
func jitter(step time.Duration) time.Duration {
	if step <= 0 {
		return step
	}
	return step - rand.N(step/2+1)
}
