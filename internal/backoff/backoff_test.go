package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelaysDoubleUpToTheCeiling(t *testing.T) {
	b := New(time.Millisecond, 5*time.Millisecond)
	var got []time.Duration
	for range 5 {
		got = append(got, b.Delay())
		if !b.Wait(context.Background()) {
			t.Fatal("Wait returned false without a cancelled context")
		}
	}
	want := []time.Duration{1, 2, 4, 5, 5}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays = %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if b.Delay() != time.Millisecond {
		t.Fatalf("after Reset the delay is %v, want 1ms", b.Delay())
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
	if d := New(time.Second, time.Millisecond).Delay(); d != time.Millisecond {
		t.Fatalf("Delay = %v, want the 1ms ceiling", d)
	}
}
