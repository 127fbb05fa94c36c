package kafkasink_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// A transaction outlives its timeout, the broker aborts it, and the
// client cannot recover its producer id: the broker answers the
// recovery's abort PRODUCER_FENCED, as it answers an instance a newer one
// fenced. With Config.Guard consenting, the sink claims its transactional
// id afresh, once, and goes on, exactly once, and, fenced again right
// after, stops rather than claim again; without a guard, or when the guard
// refuses right before the claim, it stops as fenced and sends no claim.
func TestTransactionTimeoutClaimsAfreshWithGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// guard answers its nth call since the held Write returned (0
		// before).
		guard     func(n int) error
		wantClaim bool
	}{
		{"guard consents", func(int) error { return nil }, true},
		{"no guard", nil, false},
		{"guard refuses right before the claim", func(n int) error {
			// The recovery asks it first (n 1), the claim next.
			if n >= 2 {
				return errors.New("lease lost")
			}
			return nil
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			const topic = "kafkasink.public.orders"
			timedOut, calls := false, 0 // Guard runs on the goroutine of Write
			s := newSink(t, brokers, "claim", func(cfg *kafkasink.Config) {
				cfg.TransactionTimeout = 2 * time.Second
				cfg.CommitTimeout = 500 * time.Millisecond
				if tc.guard != nil {
					cfg.Guard = func() error {
						if timedOut {
							calls++
						}
						return tc.guard(calls)
					}
				}
			})
			a := sinktest.Inserts("public", "orders", 100, 1, 3)
			write(t, s, a)

			// The broker sits on the next produce for longer than the
			// transaction may live: it aborts it at its timeout.
			release := make(chan struct{})
			pauseNext(c, kmsg.Produce, release)
			go func() { time.Sleep(3 * time.Second); close(release) }()
			b := sinktest.Inserts("public", "orders", 200, 4, 3)
			err := s.Write(ctxT(t), kafkasink.Batch{Events: b})
			if !errors.Is(err, kafkasink.ErrTransactionTimeout) || !kafkasink.IsRetryable(err) {
				t.Fatalf("held Write: %v, want a retryable ErrTransactionTimeout", err)
			}
			<-release
			timedOut = true

			// The recovery's abort is refused as the client that cannot
			// recover its producer id sees it.
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TopLevel: true, Err: kerr.ProducerFenced})
			claims := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Observe: true, Count: -1,
				When: func(r kmsg.Request) bool { return r.(*kmsg.InitProducerIDRequest).ProducerID < 0 }})
			err = s.Write(context.Background(), kafkasink.Batch{Events: b})
			if tc.wantClaim {
				if err != nil {
					t.Fatalf("Write after the timeout: %v, want the sink to claim its id afresh and go on", err)
				}
				if claims.Hits() != 1 {
					t.Fatalf("%d fresh claims of the transactional id, want 1", claims.Hits())
				}
				c3 := sinktest.Inserts("public", "orders", 300, 7, 3)
				write(t, s, c3)

				// Fenced again right after the claim, though the guard
				// consents: another instance must be using the id, and
				// claiming again would fence it in a loop. The sink stops.
				c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.ProducerFenced})
				c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TopLevel: true, Err: kerr.ProducerFenced})
				err = s.Write(context.Background(), kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 400, 10, 3)})
				if !errors.Is(err, kafkasink.ErrFenced) || !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "fenced again") {
					t.Fatalf("Write fenced again right after the claim: %v, want a fatal ErrFenced saying it was fenced again", err)
				}
				if claims.Hits() != 1 {
					t.Fatalf("%d fresh claims of the transactional id, want still 1", claims.Hits())
				}
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append(a, b...), c3...))
				return
			}
			if !errors.Is(err, kafkasink.ErrFenced) || !kafkasink.IsFatal(err) {
				t.Fatalf("Write after the timeout: %v, want a fatal ErrFenced", err)
			}
			if claims.Hits() != 0 {
				t.Fatalf("%d fresh claims of the transactional id, want none", claims.Hits())
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)
		})
	}
}
