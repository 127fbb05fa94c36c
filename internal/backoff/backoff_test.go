package backoff

import (
	"context"
	"testing"
	"time"
)

// TestDelaysDoubleUpToTheCeilingWithinTheirJitter: the i-th delay lies in
// the upper half of min(first·2^i, max), never above max, and Reset
// starts the schedule again.
func TestDelaysDoubleUpToTheCeilingWithinTheirJitter(t *testing.T) {
	const first, ceiling = 40 * time.Microsecond, 200 * time.Microsecond
	steps := []time.Duration{40, 80, 160, 200, 200, 200}
	for round := range 50 {
		b := New(first, ceiling)
		for i, step := range steps {
			step *= time.Microsecond
			if d := b.Delay(); d < step/2 || d > step {
				t.Fatalf("round %d: delay %d is %v, want within [%v, %v]", round, i, d, step/2, step)
			}
			if !b.Wait(context.Background()) {
				t.Fatal("Wait returned false without a cancelled context")
			}
		}
		b.Reset()
		if d := b.Delay(); d < first/2 || d > first {
			t.Fatalf("after Reset the delay is %v, want within [%v, %v]", d, first/2, first)
		}
	}
}

// TestTwoBackoffsDoNotWaitInLockstep: two Backoffs with the same
// schedule, as two replicas that failed together have, draw different
// delays: out of ten steps of a second (half a billion possible
// delays each, so two equal ones are a chance of about 2e-8), at most one
// pair equal.
func TestTwoBackoffsDoNotWaitInLockstep(t *testing.T) {
	a, b := New(time.Second, time.Second), New(time.Second, time.Second)
	same := 0
	for range 10 {
		if a.Delay() == b.Delay() {
			same++
		}
		// Draw the next delays without sleeping: a cancelled Wait
		// moves the schedule on too.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.Wait(ctx)
		b.Wait(ctx)
	}
	if same > 1 {
		t.Fatalf("two Backoffs drew the same delay %d times out of 10: they wait in lockstep", same)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if New(time.Hour, time.Hour).Wait(ctx) {
		t.Fatal("Wait returned true for a cancelled context")
	}
	if time.Since(start) > time.Minute {
		t.Fatal("Wait slept through a cancelled context")
	}
}

func TestFirstAboveCeilingIsCapped(t *testing.T) {
	if d := New(time.Second, time.Millisecond).Delay(); d > time.Millisecond || d < time.Millisecond/2 {
		t.Fatalf("Delay = %v, want within the upper half of the 1ms ceiling", d)
	}
}
