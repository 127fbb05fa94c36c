package kafkasink_test

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestGuardStopsTheSinkBeforeItSends: once Config.Guard refuses, an
// exactly-once sink sends nothing more under its transactional id and
// stops as fenced, naming the guard's reason. In particular, after a
// commit whose outcome is unclear, its recovery does not re-initialise the
// producer id (KIP-360), which on a real broker aborts whatever
// transaction a newer instance has open under the id. Without the guard
// in recovery, the fake cluster sees that request.
func TestGuardStopsTheSinkBeforeItSends(t *testing.T) {
	t.Parallel()
	everyRequest := []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.Produce, kmsg.EndTxn}
	for _, tc := range []struct {
		name string
		// refuse arranges for the guard to start refusing, and returns
		// whether it has.
		refuse func(c *kfake.Cluster, refused *atomic.Bool) func() bool
		// watched are the requests that must not be sent once the
		// guard refused.
		watched []kmsg.Key
	}{
		{"before a Write", func(_ *kfake.Cluster, refused *atomic.Bool) func() bool {
			refused.Store(true)
			return refused.Load
		}, everyRequest},
		{"when a commit's outcome is unclear", func(c *kfake.Cluster, refused *atomic.Bool) func() bool {
			var once sync.Once
			c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				handled := false
				var resp *kmsg.EndTxnResponse
				once.Do(func() {
					// The process froze and lost its turn while
					// its commit was on the wire.
					refused.Store(true)
					resp = req.ResponseKind().(*kmsg.EndTxnResponse)
					resp.ErrorCode = kerr.UnknownServerError.Code
					handled = true
				})
				c.DropControl()
				if !handled {
					return nil, nil, false
				}
				return resp, nil, true
			})
			return refused.Load
		}, everyRequest},
		// The transaction fails, and the guard refuses before it is
		// aborted: the sink stops as fenced instead of ending a
		// transaction that may no longer be its own. (The records the
		// client had sent already are not the guard's to stop: their
		// epoch is fenced once a newer instance initialised.)
		{"when a transaction fails", func(c *kfake.Cluster, refused *atomic.Bool) func() bool {
			var once sync.Once
			c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.DropControl()
				var resp *kmsg.ProduceResponse
				once.Do(func() {
					refused.Store(true)
					resp = refuseProduce(req.(*kmsg.ProduceRequest), kerr.InvalidRecord)
				})
				if resp == nil {
					return nil, nil, false
				}
				return resp, nil, true
			})
			return refused.Load
		}, []kmsg.Key{kmsg.InitProducerID, kmsg.EndTxn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			var refused atomic.Bool
			var logs sinktest.SyncBuffer
			s := newSink(t, brokers, "guarded", func(cfg *kafkasink.Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				cfg.Guard = func() error {
					if refused.Load() {
						return errors.New("the lease was lost")
					}
					return nil
				}
			})
			write(t, s, sinktest.Inserts("public", "orders", 100, 1, 3))

			refusing := tc.refuse(c, &refused)
			var mu sync.Mutex
			var sent []string
			for _, key := range tc.watched {
				c.ControlKey(key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
					if refusing() {
						mu.Lock()
						sent = append(sent, kmsg.NameForKey(req.Key()))
						mu.Unlock()
					}
					return nil, nil, false
				})
			}

			err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 200, 4, 3)})
			if !errors.Is(err, kafkasink.ErrFenced) || !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "the lease was lost") {
				t.Fatalf("Write: %v, want a fatal ErrFenced naming the guard's reason", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sent) > 0 {
				t.Errorf("after the guard refused, the sink sent %v; want nothing", sent)
			}
			// The sink stopped: a log line promising a recovery
			// would mislead whoever reads it.
			if strings.Contains(logs.String(), "recovers first") {
				t.Errorf("the sink logged a recovery it will not make:\n%s", logs.String())
			}
		})
	}
}

// refuseProduce answers req with code for every partition it writes to.
func refuseProduce(req *kmsg.ProduceRequest, code *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code.Code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
