package topicadmin

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Info is what the sink needs to know of a destination topic.
type Info struct {
	Partitions      int
	MaxMessageBytes int
	// Compacted: cleanup.policy includes compact, so the broker refuses a
	// record without a key (INVALID_RECORD), failing its whole transaction.
	Compacted bool
}

// Settings are how the sink makes sure of its destination and dead-letter
// topics: kafkasink.Topics' creation settings.
type Settings struct {
	MustExist         bool
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	// Missing is the error a topic missing under MustExist wraps
	// (kafkasink.ErrTopicMissing).
	Missing error
}

// Ensure makes sure a destination or dead-letter topic exists, creating
// it when it is missing and s.MustExist is false, waits until every
// partition has a leader, and reads its max.message.bytes.
func Ensure(ctx context.Context, cl *kgo.Client, topic string, s Settings) (Info, error) {
	adm := kadm.NewClient(cl)
	md, err := Metadata(ctx, cl, topic)
	if err != nil {
		return Info{}, err
	}
	if md == nil {
		if s.MustExist {
			return Info{}, fmt.Errorf("%w: %q (Topics.MustExist is set: create it, or route the table elsewhere)", s.Missing, topic)
		}
		cfgs := make(map[string]*string, len(s.Configs))
		for k, v := range s.Configs {
			cfgs[k] = &v
		}
		if err := Create(ctx, adm, topic, s.Partitions, s.ReplicationFactor, cfgs); err != nil {
			return Info{}, fmt.Errorf("kafkasink: creating topic %q (partitions %d, replication factor %d): %w", topic, s.Partitions, s.ReplicationFactor, err)
		}
	}
	n, cfgs, err := Ready(ctx, cl, adm, topic)
	if err != nil {
		return Info{}, err
	}
	maxBytes, err := strconv.Atoi(cfgs["max.message.bytes"])
	if err != nil || maxBytes <= 0 {
		return Info{}, fmt.Errorf("kafkasink: topic %q has no usable max.message.bytes (%q)", topic, cfgs["max.message.bytes"])
	}
	compact, _ := CleanupPolicies(cfgs)
	return Info{Partitions: n, MaxMessageBytes: maxBytes, Compacted: compact}, nil
}

// Cache ensures each destination topic exists (creating it when allowed)
// the first time it is used, and remembers its limits. Safe for
// concurrent use: the client calls Peek from its own goroutines.
type Cache struct {
	settings Settings
	mu       sync.Mutex
	topics   map[string]Info
	deleted  map[string]error // topics deleted under a running sink
}

// NewCache returns an empty Cache that makes sure of topics by s.
func NewCache(s Settings) *Cache {
	return &Cache{settings: s, topics: make(map[string]Info), deleted: make(map[string]error)}
}

// Get returns the topic's info, ensuring it exists on first use. A topic
// deleted while the sink ran stays an error until the sink is restarted:
// recreating it quietly would hide the deletion from its consumers.
func (c *Cache) Get(ctx context.Context, cl *kgo.Client, topic string) (Info, error) {
	if info, ok := c.Peek(topic); ok {
		return info, nil
	}
	c.mu.Lock()
	gone := c.deleted[topic]
	c.mu.Unlock()
	if gone != nil {
		return Info{}, gone
	}
	return c.ensure(ctx, cl, topic, c.settings)
}

// Refresh reads the info of the topics of records again from the
// broker, which may have changed since the sink first used them
// (max.message.bytes lowered), and remembers it. It calls lowered for
// each topic whose max.message.bytes is now below what was known.
func (c *Cache) Refresh(ctx context.Context, cl *kgo.Client, records []*kgo.Record, lowered func(topic string, now, was int)) error {
	s := c.settings
	s.MustExist = true
	seen := make(map[string]bool)
	for _, r := range records {
		if seen[r.Topic] {
			continue
		}
		seen[r.Topic] = true
		old, _ := c.Peek(r.Topic)
		info, err := c.ensure(ctx, cl, r.Topic, s)
		if err != nil {
			return fmt.Errorf("kafkasink: reading topic %q's limits again after the broker refused records: %w", r.Topic, err)
		}
		if info.MaxMessageBytes < old.MaxMessageBytes {
			lowered(r.Topic, info.MaxMessageBytes, old.MaxMessageBytes)
		}
	}
	return nil
}

func (c *Cache) ensure(ctx context.Context, cl *kgo.Client, topic string, s Settings) (Info, error) {
	info, err := Ensure(ctx, cl, topic, s)
	if err != nil {
		return Info{}, err
	}
	c.Remember(topic, info)
	return info, nil
}

// Remember records info as what is known of topic.
func (c *Cache) Remember(topic string, info Info) {
	c.mu.Lock()
	c.topics[topic] = info
	c.mu.Unlock()
}

// Peek returns what is known of topic without asking the broker.
func (c *Cache) Peek(topic string) (Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := c.topics[topic]
	return info, ok
}

// Deleted asks the broker whether the topic of any of records, which the
// sink wrote to, was deleted while it ran: the client keeps retrying a
// deleted topic for a while, so a write that failed or timed out asks
// directly, for up to 10 seconds whatever ctx says. It returns the index
// of the first record of a deleted topic and the error, wrapping Missing,
// that every later use of the topic returns; -1 and nil when none was.
func (c *Cache) Deleted(ctx context.Context, cl *kgo.Client, records []*kgo.Record) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	checked := make(map[string]bool)
	for j, r := range records {
		if checked[r.Topic] {
			continue
		}
		checked[r.Topic] = true
		if md, err := Metadata(ctx, cl, r.Topic); err == nil && md == nil {
			gone := fmt.Errorf("%w: %q was deleted while the sink ran; recreate it (or route its tables elsewhere) and restart the sink", c.settings.Missing, r.Topic)
			c.mu.Lock()
			delete(c.topics, r.Topic)
			c.deleted[r.Topic] = gone
			c.mu.Unlock()
			return j, gone
		}
	}
	return -1, nil
}
