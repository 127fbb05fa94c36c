package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxTopicNameLen is Kafka's limit on topic names.
const maxTopicNameLen = 249

func validTopicChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validateTopicName applies Kafka's rules for topic names.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("topic name %.40q... is %d bytes, over Kafka's limit of %d", name, len(name), maxTopicNameLen)
	case !validTopicChars(name):
		return fmt.Errorf("topic name %q has characters outside [a-zA-Z0-9._-]", name)
	}
	return nil
}

// problems returns the configuration problems of t.
func (t *Topics) problems() []string {
	var p []string
	if t.Template != "" && t.Prefix != "" {
		p = append(p, "Topics.Template and Topics.Prefix are both set: use one")
	}
	if t.Template != "" {
		probe := strings.NewReplacer("{schema}", "s", "{table}", "t").Replace(t.Template)
		if strings.ContainsAny(probe, "{}") {
			p = append(p, fmt.Sprintf("Topics.Template %q has an unknown placeholder: only {schema} and {table} are allowed", t.Template))
		} else if err := validateTopicName(probe); err != nil {
			p = append(p, "Topics.Template: "+err.Error())
		}
	}
	if t.Prefix != "" {
		if err := validateTopicName(t.Prefix); err != nil {
			p = append(p, "Topics.Prefix: "+err.Error())
		}
	}
	for table, topic := range t.Routes {
		if err := validateTopicName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Routes[%q]: %v", table, err))
		}
	}
	_, routeProblems := parseTableKeys("Topics.Routes", t.Routes)
	p = append(p, routeProblems...)
	for _, topic := range t.Shared {
		if err := validateTopicName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Shared: %v", err))
		}
	}
	if t.Partitions == 0 || t.Partitions < -1 {
		p = append(p, fmt.Sprintf("Topics.Partitions %d: want a positive count or -1 for the broker's default", t.Partitions))
	}
	if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
		p = append(p, fmt.Sprintf("Topics.ReplicationFactor %d: want a positive factor or -1 for the broker's default", t.ReplicationFactor))
	}
	return p
}

// routeKind says which setting of Topics named a table's topic.
type routeKind string

const (
	byRoute    routeKind = "Topics.Route"
	byRoutes   routeKind = "Topics.Routes"
	byTemplate routeKind = "Topics.Template"
	byPrefix   routeKind = "Topics.Prefix"
)

// route names the topic of an event's table and checks the name.
func (r *router) route(schema, table string) (string, routeKind, error) {
	t := r.topics
	var (
		topic string
		kind  routeKind
	)
	switch {
	case t.Route != nil:
		kind = byRoute
		var err error
		if topic, err = t.Route(schema, table); err != nil {
			return "", kind, fmt.Errorf("Topics.Route for %s: %w", TableName(schema, table), err)
		}
	case r.routes[[2]string{schema, table}] != "":
		topic, kind = r.routes[[2]string{schema, table}], byRoutes
	case t.Template != "":
		topic, kind = strings.NewReplacer("{schema}", schema, "{table}", table).Replace(t.Template), byTemplate
	default:
		topic, kind = t.Prefix+"."+schema+"."+table, byPrefix
	}
	if err := validateTopicName(topic); err != nil {
		return "", kind, fmt.Errorf("topic for %s by %s: %w; route the table explicitly with a Topics.Routes entry", TableName(schema, table), kind, err)
	}
	return topic, kind, nil
}

// parseTableKeys returns m keyed by table, and the problems of its keys:
// names ParseTableName refuses or that have no schema, and two keys naming
// one table (such as public.a and public."a"). field names m in problems.
func parseTableKeys[V any](field string, m map[string]V) (map[[2]string]V, []string) {
	out := make(map[[2]string]V, len(m))
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		schema, table, err := ParseTableName(name)
		if err == nil && schema == "" {
			err = fmt.Errorf("table name %q has no schema: want schema.table", name)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s key: %v", field, err))
			continue
		}
		k := [2]string{schema, table}
		if _, dup := out[k]; dup {
			problems = append(problems, fmt.Sprintf("%s has two keys for table %s", field, TableName(schema, table)))
		}
		out[k] = m[name]
	}
	return out, problems
}

// router names the topic of each table, and remembers which table each
// topic carries, so that two tables reach one topic only on purpose: with
// the same keys, compaction and upsert consumers would merge their rows.
// Derived names collide easily ("a.b".c and a."b.c" are both
// <prefix>.a.b.c; a template "{schema}_{table}" makes a_b_c of a_b.c and
// a.b_c). Tables may share a
// topic when each has a Topics.Routes entry naming it, or when the topic
// is in Topics.Shared. The checkpoint and dead-letter topics belong to
// the sink and no table may route to them.
//
// A claim lasts for the sink's life; tables first seen by different runs
// of the sink cannot be compared (see Topics).
//
// Not safe for concurrent use: the sink uses it under its write guard.
type router struct {
	topics     *Topics
	routes     map[[2]string]string   // Topics.Routes by table
	keyColumns map[[2]string][]string // Config.KeyColumns by table
	shared     map[string]bool        // Topics.Shared
	claims     map[string]topicClaim  // by collisionName
	// granted holds the (topic, schema, table) claims that succeeded, so
	// that a Topics.Route answer seen before costs one lookup.
	granted map[[3]string]bool
}

// topicClaim is the first user of a topic.
type topicClaim struct {
	topic string
	owner string    // the table (TableName), or the Config field of a sink's topic
	kind  routeKind // how the table was routed; "" for a sink's topic
}

// newRouter returns the router of a validated cfg.
func newRouter(cfg *Config) *router {
	// validate refused any problem of the keys.
	routes, _ := parseTableKeys("Topics.Routes", cfg.Topics.Routes)
	keyColumns, _ := parseTableKeys("KeyColumns", cfg.KeyColumns)
	r := &router{topics: &cfg.Topics, routes: routes, keyColumns: keyColumns, shared: make(map[string]bool),
		claims: make(map[string]topicClaim), granted: make(map[[3]string]bool)}
	for _, t := range cfg.Topics.Shared {
		r.shared[t] = true
	}
	r.claims[collisionName(cfg.CheckpointTopic)] = topicClaim{topic: cfg.CheckpointTopic, owner: "Config.CheckpointTopic"}
	if cfg.DeadLetterTopic != "" {
		r.claims[collisionName(cfg.DeadLetterTopic)] = topicClaim{topic: cfg.DeadLetterTopic, owner: "Config.DeadLetterTopic"}
	}
	return r
}

// collisionName is the name under which Kafka tells topics apart in its
// metrics, where '.' and '_' are the same character: a broker refuses to
// create a topic whose collision name an existing topic has.
func collisionName(topic string) string {
	return strings.ReplaceAll(topic, ".", "_")
}

// claim records that table (routed by kind) writes to topic, or returns a
// *ConfigError, fatal, when the topic belongs to another table or to the
// sink.
func (r *router) claim(topic, schema, table string, kind routeKind) error {
	if r.granted[[3]string{topic, schema, table}] {
		return nil
	}
	err := r.check(topic, schema, table, kind)
	if err == nil {
		r.granted[[3]string{topic, schema, table}] = true
	}
	return err
}

// check is claim without the memory of granted claims.
func (r *router) check(topic, schema, table string, kind routeKind) error {
	me := TableName(schema, table)
	prev, ok := r.claims[collisionName(topic)]
	switch {
	case !ok:
		r.claims[collisionName(topic)] = topicClaim{topic: topic, owner: me, kind: kind}
		return nil
	case prev.kind == "":
		return &ConfigError{Problems: []string{fmt.Sprintf("table %s routes to topic %q (by %s), which is the sink's %s: route the table elsewhere with a Topics.Routes entry",
			me, topic, kind, prev.owner)}}
	case prev.topic != topic:
		return &ConfigError{Problems: []string{fmt.Sprintf("table %s routes to topic %q (by %s) and table %s to %q (by %s): Kafka does not tell '.' and '_' apart in topic names' metrics and refuses to create both; route one of them elsewhere with a Topics.Routes entry",
			me, topic, kind, prev.owner, prev.topic, prev.kind)}}
	case prev.owner == me, r.shared[topic], prev.kind == byRoutes && kind == byRoutes:
		return nil
	}
	return &ConfigError{Problems: []string{fmt.Sprintf("tables %s (by %s) and %s (by %s) both route to topic %q, where their records would mix under the same keys: route one of them elsewhere with a Topics.Routes entry, or, if they are to share the topic, list it in Topics.Shared or give both tables a Topics.Routes entry naming it",
		prev.owner, prev.kind, me, kind, topic)}}
}

// topicInfo is what the sink needs to know of a destination topic.
type topicInfo struct {
	partitions      int
	maxMessageBytes int
}

// topicCache ensures each destination topic exists (creating it when
// allowed) the first time it is used, and remembers its limits.
type topicCache struct {
	cfg     *Topics
	mu      sync.Mutex
	topics  map[string]topicInfo
	deleted map[string]error // topics deleted under a running sink
}

func newTopicCache(cfg *Topics) *topicCache {
	return &topicCache{cfg: cfg, topics: make(map[string]topicInfo), deleted: make(map[string]error)}
}

// get returns the topic's info, ensuring it exists on first use. A topic
// deleted while the sink ran stays an error until the sink is restarted:
// recreating it quietly would hide the deletion from its consumers.
func (c *topicCache) get(ctx context.Context, cl *kgo.Client, topic string) (topicInfo, error) {
	if info, ok := c.peek(topic); ok {
		return info, nil
	}
	c.mu.Lock()
	gone := c.deleted[topic]
	c.mu.Unlock()
	if gone != nil {
		return topicInfo{}, gone
	}
	info, err := ensureTopic(ctx, cl, topic, c.cfg.MustExist, c.cfg.Partitions, c.cfg.ReplicationFactor, c.cfg.Configs)
	if err != nil {
		return topicInfo{}, err
	}
	c.mu.Lock()
	c.topics[topic] = info
	c.mu.Unlock()
	return info, nil
}

// peek returns what is known of topic without asking the broker. Safe for
// concurrent use: the client calls it from its own goroutines.
func (c *topicCache) peek(topic string) (topicInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := c.topics[topic]
	return info, ok
}

// markDeleted records that topic was deleted under the running sink; err
// is what every later use returns.
func (c *topicCache) markDeleted(topic string, err error) {
	c.mu.Lock()
	delete(c.topics, topic)
	c.deleted[topic] = err
	c.mu.Unlock()
}

// topicMetadata asks a broker for a topic's metadata, bypassing the
// client's metadata cache (kadm's calls reuse answers up to 5s old, which
// would hide a topic just created or just deleted). It never asks the broker
// to auto-create the topic. A missing topic is (nil, nil).
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafkasink: reading metadata of topic %q: %w", topic, withCause(ctx, err))
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("kafkasink: topic %q: %w", topic, err)
		}
		return t, nil
	}
	return nil, nil
}

// ensureTopic creates the topic when it is missing and mustExist is false,
// waits until every partition has a leader, and reads its
// max.message.bytes.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, mustExist bool, partitions int32, rf int16, configs map[string]string) (topicInfo, error) {
	adm := kadm.NewClient(cl)
	md, err := topicMetadata(ctx, cl, topic)
	if err != nil {
		return topicInfo{}, err
	}
	if md == nil {
		if mustExist {
			return topicInfo{}, fmt.Errorf("%w: %q (Topics.MustExist is set: create it, or route the table elsewhere)", ErrTopicMissing, topic)
		}
		cfgs := make(map[string]*string, len(configs))
		for k, v := range configs {
			cfgs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, partitions, rf, cfgs, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return topicInfo{}, fmt.Errorf("kafkasink: creating topic %q (partitions %d, replication factor %d): %w", topic, partitions, rf, err)
		}
	}
	n, err := waitForLeaders(ctx, cl, topic)
	if err != nil {
		return topicInfo{}, err
	}
	maxBytes, err := topicMaxMessageBytes(ctx, adm, topic)
	if err != nil {
		return topicInfo{}, err
	}
	return topicInfo{partitions: n, maxMessageBytes: maxBytes}, nil
}

// leaderWait bounds waitForLeaders.
const leaderWait = 15 * time.Second

var errLeaderTimeout = &timeoutError{"waiting for the topic's partition leaders"}

// waitForLeaders polls metadata until every partition of topic has a
// leader, so the first produce does not race the topic's propagation.
func waitForLeaders(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	// A topic that exists gets its leaders within seconds; one that
	// stays without them (not created after all, a cluster that lost
	// its brokers) is a retryable failure, not a hang.
	ctx, cancel := context.WithTimeoutCause(ctx, leaderWait, errLeaderTimeout)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		md, err := topicMetadata(ctx, cl, topic)
		if err == nil && md != nil && len(md.Partitions) > 0 {
			ready := true
			for _, p := range md.Partitions {
				ready = ready && p.Leader >= 0 && p.ErrorCode == 0
			}
			if ready {
				return len(md.Partitions), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kafkasink: waiting for leaders of topic %q: %w", topic, withCause(ctx, ctx.Err()))
		case <-time.After(delay):
		}
	}
}

// topicConfigs reads a topic's effective configuration. The topic exists
// (its callers have seen its leaders), but the broker answering may not
// know it yet: right after a create on a cluster, each broker learns of
// the topic on its own, and until then says UNKNOWN_TOPIC_OR_PARTITION.
// That answer is retried for a few seconds.
func topicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	var rc kadm.ResourceConfig
	for delay, deadline := 20*time.Millisecond, time.Now().Add(5*time.Second); ; delay = min(2*delay, 500*time.Millisecond) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			rc, err = rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return nil, fmt.Errorf("kafkasink: describing configs of topic %q: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafkasink: describing configs of topic %q: %w (%w)", topic, err, context.Cause(ctx))
		case <-time.After(delay):
		}
	}
	out := make(map[string]string, len(rc.Configs))
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out, nil
}

func topicMaxMessageBytes(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	cfgs, err := topicConfigs(ctx, adm, topic)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(cfgs["max.message.bytes"])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("kafkasink: topic %q has no usable max.message.bytes (%q)", topic, cfgs["max.message.bytes"])
	}
	return n, nil
}
