package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// config is what the flags asked for.
type config struct {
	brokers      []string
	contenders   []contender
	sizes        []int
	batches      []int
	events       int
	rounds       int
	compressions []string
	headerSets   []string
	partitions   int32
	profile      string
}

// shape is one column of the workload: compression, header set, event
// size and batch size.
type shape struct {
	compression, headers string
	size, batch          int
}

// results are each contender's runs per shape, in round order.
type results map[shape]map[string][]result

// run measures every contender at every shape, cfg.rounds times,
// alternating: each round runs every contender once per shape, starting
// one contender later than the round before, so that none always runs
// first or right after the same neighbour. Each run writes to topics of
// its own, which are read back (read_committed) and must hold exactly the
// events written, then deleted.
func run(ctx context.Context, cfg config, runOne runner, log io.Writer) (results, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	brokers, err := admin.ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the brokers of %s: %w", strings.Join(cfg.brokers, ","), err)
	}
	rf := int16(min(3, len(brokers)))
	prefix := "kafkasink-bench-" + randomHex() + "-"
	defer deleteTopics(admin, prefix)

	out := results{}
	n := 0
	for round := range cfg.rounds {
		for _, sh := range cfg.shapes() {
			if out[sh] == nil {
				out[sh] = map[string][]result{}
			}
			for i := range cfg.contenders {
				c := cfg.contenders[(i+round)%len(cfg.contenders)]
				n++
				s := spec{Contender: c.name, Brokers: cfg.brokers, Compression: sh.compression, Headers: sh.headers, Size: sh.size, Batch: sh.batch,
					Events: cfg.events / sh.batch * sh.batch, Topic: fmt.Sprintf("%s%d", prefix, n), CheckpointTopic: fmt.Sprintf("%s%d-ckpt", prefix, n)}
				if s.Events == 0 {
					return nil, fmt.Errorf("-events %d is below one batch of %d", cfg.events, sh.batch)
				}
				if cfg.profile != "" {
					s.Profile = fmt.Sprintf("%s/%s-%s-%s-%dB-%d-r%d", cfg.profile, c.name, sh.compression, sh.headers, sh.size, sh.batch, round+1)
				}
				r, err := runVerified(ctx, admin, cfg.partitions, rf, s, runOne)
				if err != nil {
					return nil, fmt.Errorf("round %d, %s, headers %s, %d B events in batches of %d: %s: %w", round+1, sh.compression, sh.headers, sh.size, sh.batch, c.name, err)
				}
				fmt.Fprintf(log, "round %d %-6s %-7s %5d B x %5d  %-20s %9.0f events/s  %6.1f allocs/event  %4d MiB  %6.0f log B/event\n",
					round+1, sh.compression, sh.headers, sh.size, sh.batch, c.name, float64(r.Events)/r.Seconds, float64(r.Mallocs)/float64(r.Events), r.RSS>>20,
					float64(r.LogBytes)/float64(r.Events))
				out[sh][c.name] = append(out[sh][c.name], r)
			}
		}
	}
	return out, nil
}

// runVerified makes the topics of s, runs it, reads its topic back and
// deletes the topics.
func runVerified(ctx context.Context, admin *kadm.Client, partitions int32, rf int16, s spec, runOne runner) (result, error) {
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = admin.DeleteTopics(dctx, s.Topic, s.CheckpointTopic)
	}()
	if err := createTopic(ctx, admin, s.Topic, partitions, rf, nil); err != nil {
		return result{}, err
	}
	compact := "compact"
	if err := createTopic(ctx, admin, s.CheckpointTopic, 1, rf, map[string]*string{"cleanup.policy": &compact}); err != nil {
		return result{}, err
	}
	r, err := runOne(ctx, s)
	if err != nil {
		return result{}, err
	}
	got, err := countCommitted(ctx, admin, s.Brokers, s.Topic)
	if err != nil {
		return result{}, fmt.Errorf("reading topic %s back: %w", s.Topic, err)
	}
	if got != int64(s.Events) {
		return result{}, fmt.Errorf("topic %s holds %d records for read_committed consumers; %d were written", s.Topic, got, s.Events)
	}
	if r.LogBytes, err = logBytes(ctx, admin, s.Topic, partitions); err != nil {
		return result{}, fmt.Errorf("measuring topic %s on the brokers: %w", s.Topic, err)
	}
	return r, nil
}

// shapes are the columns of the workload, in the order they are run.
func (cfg config) shapes() []shape {
	var out []shape
	for _, compression := range cfg.compressions {
		for _, headers := range cfg.headerSets {
			for _, size := range cfg.sizes {
				for _, batch := range cfg.batches {
					out = append(out, shape{compression, headers, size, batch})
				}
			}
		}
	}
	return out
}

// logBytes is the size of topic's log, each partition counted once (its
// largest replica): the record batches as the producer sent them, so
// compressed, with their headers and the transaction markers. It is what
// the run put on the wire, give or take the requests' own framing.
func logBytes(ctx context.Context, admin *kadm.Client, topic string, partitions int32) (int64, error) {
	set := kadm.TopicsSet{topic: map[int32]struct{}{}}
	for p := range partitions {
		set[topic][p] = struct{}{}
	}
	dirs, err := admin.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return 0, err
	}
	largest := make(map[int32]int64)
	dirs.Each(func(d kadm.DescribedLogDir) {
		for p, dp := range d.Topics[topic] {
			largest[p] = max(largest[p], dp.Size)
		}
	})
	if len(largest) != int(partitions) {
		return 0, fmt.Errorf("the brokers describe %d of its %d partitions", len(largest), partitions)
	}
	var n int64
	for _, size := range largest {
		n += size
	}
	return n, nil
}

func createTopic(ctx context.Context, admin *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	resp, err := admin.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	// On a cluster, the other brokers learn of the new partitions a
	// little later: wait until every partition's leader answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := admin.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil && len(ends[topic]) == int(partitions) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s was created, but its %d partitions did not all answer within 30s: %v", topic, partitions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countCommitted reads topic from the start to its end offsets as a
// read_committed consumer and counts its data records.
func countCommitted(ctx context.Context, admin *kadm.Client, brokers []string, topic string) (int64, error) {
	var n int64
	err := eachCommitted(ctx, admin, brokers, topic, func(*kgo.Record) error { n++; return nil })
	return n, err
}

// eachCommitted reads topic from the start to its end offsets as a
// read_committed consumer and calls f with each data record, stopping at
// its first error. Control records (transaction markers) are kept only
// to know when a partition has been read to its end.
func eachCommitted(ctx context.Context, admin *kadm.Client, brokers []string, topic string, f func(*kgo.Record) error) error {
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	left := map[int32]int64{} // partition → the last offset still to read
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset - 1
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // a soak's topic holds gigabytes
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d partitions not read to their end: %w", len(left), err)
		}
		if err := fs.Err(); err != nil {
			return err
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if !r.Attrs.IsControl() {
				if err := f(r); err != nil {
					return err
				}
			}
			if last, ok := left[r.Partition]; ok && r.Offset >= last {
				delete(left, r.Partition)
			}
		}
	}
	return nil
}

// deleteTopics deletes what is left of this run's topics, after a failure.
func deleteTopics(admin *kadm.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := admin.ListTopics(ctx)
	if err != nil {
		return
	}
	var mine []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, prefix) {
			mine = append(mine, t)
		}
	}
	if len(mine) > 0 {
		_, _ = admin.DeleteTopics(ctx, mine...)
	}
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// table renders res as one Markdown table: per shape and contender, the
// medians over the rounds, and the median of the per-round ratios to the
// two raw franz-go ceilings measured in the same round. Wire MB/s is the
// topic's log (see logBytes) over the run's time.
func table(cfg config, res results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d events per run, %d rounds (medians), %d partitions\n\n", cfg.events, cfg.rounds, cfg.partitions)
	b.WriteString("| compression | headers | event | batch | contender | events/s | MB/s | wire MB/s | wire B/event | allocs/event | peak RSS MiB | ÷ franz-idempotent | ÷ franz-txn |\n")
	b.WriteString("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, sh := range cfg.shapes() {
		runs := res[sh]
		for _, c := range cfg.contenders {
			rs := runs[c.name]
			rate := func(r result) float64 { return float64(r.Events) / r.Seconds }
			ratio := func(ceiling string) string {
				base := runs[ceiling]
				if len(base) != len(rs) || c.name == ceiling {
					return ""
				}
				var xs []float64
				for i := range rs {
					xs = append(xs, rate(rs[i])/rate(base[i]))
				}
				return fmt.Sprintf("%.2f", median(xs))
			}
			fmt.Fprintf(&b, "| %s | %s | %d B | %d | %s | %.0fk | %.1f | %.1f | %.0f | %.1f | %.0f | %s | %s |\n", sh.compression, sh.headers, sh.size, sh.batch, c.name,
				medianOf(rs, func(r result) float64 { return rate(r) / 1000 }),
				medianOf(rs, func(r result) float64 { return float64(r.Bytes) / r.Seconds / 1e6 }),
				medianOf(rs, func(r result) float64 { return float64(r.LogBytes) / r.Seconds / 1e6 }),
				medianOf(rs, func(r result) float64 { return float64(r.LogBytes) / float64(r.Events) }),
				medianOf(rs, func(r result) float64 { return float64(r.Mallocs) / float64(r.Events) }),
				medianOf(rs, func(r result) float64 { return float64(r.RSS) / (1 << 20) }),
				ratio("franz-idempotent"), ratio("franz-txn"))
		}
	}
	b.WriteString("\nContenders:\n")
	for _, c := range cfg.contenders {
		fmt.Fprintf(&b, "- %s: %s\n", c.name, c.what)
	}
	return b.String()
}

func medianOf(rs []result, f func(result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
