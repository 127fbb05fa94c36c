package kafkasink

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHeaderMemoryReusedForEverySet: the memory of the headers is sized
// by Config.Headers, so that a delivered batch hands it on to the next
// plan with every set, not only with all five headers.
func TestHeaderMemoryReusedForEverySet(t *testing.T) {
	for _, set := range []HeaderSet{HeadersAll, HeadersMinimal} {
		t.Run(set.String(), func(t *testing.T) {
			s := arenaSink(t)
			s.cfg.Headers = set
			var first *kgo.RecordHeader // the first plan's first header
			for lsn := LSN(1); lsn <= 2; lsn++ {
				b := Batch{Events: arenaEvents(lsn, 100, -1, 'a')}
				p, err := s.planSending(context.Background(), &b, nil)
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = &p.enc.headers[:1][0]
					s.reuse(p) // as a Write that returned nil does
					continue
				}
				if &p.enc.headers[:1][0] != first {
					t.Errorf("the second plan's headers are not in the first one's memory")
				}
				if len(p.enc.headers) != 100*set.count() {
					t.Errorf("%d headers for 100 events, want %d", len(p.enc.headers), 100*set.count())
				}
			}
		})
	}
}
