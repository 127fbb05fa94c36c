package pgcdc

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestInboxKeepsOrderAndCopies puts messages from a reused buffer, as the
// connection does, and takes them in several rounds.
func TestInboxKeepsOrderAndCopies(t *testing.T) {
	t.Parallel()
	in := newInbox()
	done := make(chan struct{})
	buf := make([]byte, 0, 64)
	var got [][]byte
	next := 0
	for round := range 5 {
		for range 100 + round*900 { // below inboxMaxMessages: nobody takes meanwhile
			buf = fmt.Appendf(buf[:0], "message %d", next)
			next++
			if !in.put(buf, done) {
				t.Fatal("put refused with done open")
			}
		}
		select {
		case <-in.ready:
		default:
			t.Fatal("messages are waiting but ready is not signalled")
		}
		for _, m := range in.take(nil) {
			got = append(got, bytes.Clone(m))
		}
	}
	if len(got) != next {
		t.Fatalf("took %d messages, put %d", len(got), next)
	}
	for i, m := range got {
		if want := fmt.Sprintf("message %d", i); string(m) != want {
			t.Fatalf("message %d is %q, want %q", i, m, want)
		}
	}
}

// TestInboxBounded checks that a full inbox holds the reader back until the
// pump takes, that the end of the session releases a held reader, and that
// one message larger than the byte bound still gets in.
func TestInboxBounded(t *testing.T) {
	t.Parallel()
	in := newInbox()
	done := make(chan struct{})
	for i := range inboxMaxMessages {
		if !in.put([]byte{byte(i)}, done) {
			t.Fatal("put refused")
		}
	}
	held := make(chan bool)
	go func() { held <- in.put([]byte("one too many"), done) }()
	select {
	case <-held:
		t.Fatalf("put into an inbox of %d messages returned at once", inboxMaxMessages)
	case <-time.After(50 * time.Millisecond):
	}
	if n := len(in.take(nil)); n != inboxMaxMessages {
		t.Fatalf("took %d messages, want %d", n, inboxMaxMessages)
	}
	if ok := <-held; !ok {
		t.Fatal("the held put failed after the pump took")
	}
	if msgs := in.take(nil); len(msgs) != 1 || string(msgs[0]) != "one too many" {
		t.Fatalf("took %q, want the held message", msgs)
	}

	// The pump is gone: a held reader gives up when the session ends.
	for range inboxMaxMessages {
		in.put([]byte("x"), done)
	}
	go func() { held <- in.put([]byte("never taken"), done) }()
	time.Sleep(20 * time.Millisecond)
	close(done)
	if ok := <-held; ok {
		t.Fatal("put into a full inbox reported success after the session ended")
	}

	huge := newInbox()
	if !huge.put(make([]byte, inboxMaxBytes+1), make(chan struct{})) {
		t.Fatal("a message over the byte bound was refused by an empty inbox")
	}
	if msgs := huge.take(nil); len(msgs) != 1 || len(msgs[0]) != inboxMaxBytes+1 {
		t.Fatalf("took %d messages, want the one large message", len(msgs))
	}
}
