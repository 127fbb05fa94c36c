package kafkasinktest

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is an in-process fake Kafka cluster (franz-go's kfake) set up
// the way a sink needs it: transactions on, three brokers by default, and
// fencing that answers a stale producer epoch as Kafka does
// (FenceLikeKafka). It listens on loopback only and is closed at the end
// of the test that made it. Its methods inject faults by name (see
// faults.go); Kfake gives access to everything else kfake offers.
//
// A Cluster is safe for concurrent use.
type Cluster struct {
	t       testing.TB
	kc      *kfake.Cluster
	brokers []string

	mu sync.Mutex // guards addrs and nextNode
	// addrs is each node's listen address, so a restarted node comes
	// back where the clients look for it.
	addrs map[int32]string
	// nextNode is the id a restarted broker gets: one never used.
	nextNode int32
}

// nodes returns the node ids of the brokers, in order.
func (c *Cluster) nodes() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.addrs))
	for n := range c.addrs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Option configures NewCluster.
type Option func(*clusterConfig)

type clusterConfig struct {
	brokers    int
	partitions int
	topics     []seedTopic
	kfake      []kfake.Opt
}

type seedTopic struct {
	name       string
	partitions int32
}

// Brokers sets the number of brokers (default 3). RestartBroker and
// MoveCoordinator need at least two.
func Brokers(n int) Option { return func(c *clusterConfig) { c.brokers = n } }

// Partitions sets the broker's default partition count (num.partitions;
// default 3), which topics the sink creates get when
// Config.Topics.Partitions is -1 (its default).
func Partitions(n int) Option { return func(c *clusterConfig) { c.partitions = n } }

// Topic creates the topic with the given partitions when the cluster
// starts, for sinks whose Config.Topics.Create is off or readers that
// start before the first Write. It may be given more than once.
func Topic(name string, partitions int32) Option {
	return func(c *clusterConfig) { c.topics = append(c.topics, seedTopic{name, partitions}) }
}

// KfakeOptions passes options to kfake.NewCluster as they are, after the
// ones the other options make (SASL, broker configs, ...). The kit's own
// clients (its reader, LoseCommitAnswer and HoldTransaction) connect in
// plain text without SASL, so they need a cluster that lets them.
func KfakeOptions(opts ...kfake.Opt) Option {
	return func(c *clusterConfig) { c.kfake = append(c.kfake, opts...) }
}

// NewCluster starts a fake cluster for t and closes it when t ends. It
// fails t if the cluster cannot start.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := clusterConfig{brokers: 3, partitions: 3}
	for _, o := range opts {
		o(&cfg)
	}
	kopts := []kfake.Opt{kfake.NumBrokers(cfg.brokers), kfake.DefaultNumPartitions(cfg.partitions)}
	for _, st := range cfg.topics {
		kopts = append(kopts, kfake.SeedTopics(st.partitions, st.name))
	}
	kc, err := kfake.NewCluster(append(kopts, cfg.kfake...)...)
	if err != nil {
		t.Fatalf("kafkasinktest: starting the fake cluster: %v", err)
	}
	t.Cleanup(kc.Close)
	FenceLikeKafka(kc)
	c := &Cluster{t: t, kc: kc, brokers: kc.ListenAddrs(), addrs: make(map[int32]string)}
	// kfake numbers its brokers from 0 in the order it lists them.
	for i, addr := range c.brokers {
		c.addrs[int32(i)] = addr
	}
	c.nextNode = int32(len(c.brokers))
	return c
}

// Brokers returns the seed brokers, for Config.Brokers.
func (c *Cluster) Brokers() []string { return append([]string(nil), c.brokers...) }

// Kfake returns the kfake cluster underneath, for what the named faults do
// not cover (kfake's Fault and ControlKey).
func (c *Cluster) Kfake() *kfake.Cluster { return c.kc }
