package kafkasink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The test kit of package kafkasink_test: every helper more than one test
// file uses. Feature test files hold their tests and the helpers only they
// use. The environment's variables (KAFKASINK_TEST_*) are read only
// through internal/sinktest/env.go, which skips naming what is missing.
//
// The tests against the real Kafka of scripts/testenv.sh cover what the
// fake cluster does not model: a broker process dying and recovering its
// logs, replication and leader election, the log cleaner, the broker's own
// auto-creation. Each skips, naming the missing variable, unless
//
//	scripts/testenv.sh up --brokers 3
//	eval "$(scripts/testenv.sh env)"
//
// has set the environment. The broker is long-lived and shared, so every
// sink id, topic prefix and checkpoint topic comes from
// sinktest.UniqueName, and a passed test deletes its topics
// (onRealBrokers).
//
// The tests that kill or stop brokers (restarts_test.go, cluster_test.go,
// realfaults_test.go) do not call t.Parallel: the testing package finishes
// every sequential top-level test before it lets any parallel one run, so
// no other test of this package has the broker taken away under it. They
// run one after the other. Test binaries of other packages, or other users
// of the same environment, can still notice the single node's restart (a
// few seconds of connection errors).

// ---- Environment knobs and brokers ----

// knob reads an optional tuning variable of one test (KAFKASINK_CHECKER_*,
// KAFKASINK_REALFAULTS_*): def when it is unset, else its value parsed,
// failing the test with the variable's name when it does not parse.
func knob[T any](t *testing.T, name string, def T, parse func(string) (T, error)) T {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// parseSeed parses a seed knob.
func parseSeed(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// testBrokers returns the real broker of the test environment, or starts a
// fake cluster.
func testBrokers(t *testing.T) []string {
	t.Helper()
	if sinktest.Has(sinktest.EnvBrokers) {
		return sinktest.RealBrokers(t, sinktest.EnvBrokers)
	}
	_, brokers := sinktest.Cluster(t)
	return brokers
}

// ---- Sinks and writes ----

// newSink starts a sink on brokers with test-friendly defaults and closes
// it at the end of the test.
func newSink(t *testing.T, brokers []string, id string, edit ...func(*kafkasink.Config)) *kafkasink.Sink {
	t.Helper()
	s, err := startSink(t, brokers, id, edit...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// startSink is newSink for tests that check New's error.
func startSink(t *testing.T, brokers []string, id string, edit ...func(*kafkasink.Config)) (*kafkasink.Sink, error) {
	t.Helper()
	cfg := kafkasink.Config{Brokers: brokers, SinkID: id, TransactionTimeout: 10 * time.Second}
	for _, e := range edit {
		e(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { s.Close(context.Background()) })
	}
	return s, err
}

// tryWrite writes b and returns Write's error.
func tryWrite(t *testing.T, s *kafkasink.Sink, b kafkasink.Batch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Write(ctx, b)
}

// write writes events, failing the test on any error.
func write(t *testing.T, s *kafkasink.Sink, events []kafkasink.Event) {
	t.Helper()
	if err := tryWrite(t, s, kafkasink.Batch{Events: events}); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// writeRetrying writes b until it succeeds, the way a careful caller does:
// retryable errors are retried with backoff, and so is an attempt that
// ran out of its own 60 s deadline; anything else ends it. It
// returns the retryable errors it saw. A nil Write whose checkpoint does
// not cover the batch's last event is a silent partial write, an error.
// Safe to call from any goroutine.
func writeRetrying(ctx context.Context, s *kafkasink.Sink, b kafkasink.Batch) (retried []error, err error) {
	backoff := 200 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := s.Write(wctx, b)
		attemptTimedOut := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			if n := len(b.Events); n > 0 {
				if got, last := s.Checkpoint().Position, b.Events[n-1].Position; got.Compare(last) < 0 {
					return retried, fmt.Errorf("Write returned nil but the checkpoint is %s, below the batch's last event %s: a silent partial write", got, last)
				}
			}
			return retried, nil
		}
		// Only this attempt's own deadline ending (a Write slowed by
		// broker restarts) is retried as a caller with a per-attempt
		// timeout would; the sink recovers at the next Write.
		if !kafkasink.IsRetryable(err) && !(attemptTimedOut && !kafkasink.IsFatal(err)) {
			return retried, fmt.Errorf("Write returned an error that is not retryable (fatal=%t): %w", kafkasink.IsFatal(err), err)
		}
		retried = append(retried, err)
		select {
		case <-ctx.Done():
			return retried, fmt.Errorf("Write still failing after %d attempts when the time ran out: %w", len(retried), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// logRetried reports the retryable errors a write went through.
func logRetried(t *testing.T, what string, retried []error) {
	t.Helper()
	for i, err := range retried {
		t.Logf("%s: attempt %d: retryable error: %v", what, i+1, err)
	}
}

// ctxT returns a context bounded for one test step.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// phase is one named step of a long test.
type phase struct {
	name string
	run  func()
}

// runPhases runs a long test's steps in order. A failure names the phase
// it happened in, whether the phase went on (Error) or stopped the test
// (Fatal); whether a failed phase stops the next ones is the phases' own
// business, as it is in a test written in one piece.
func runPhases(t *testing.T, phases ...phase) {
	t.Helper()
	current := ""
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed in phase %q", current)
		}
	})
	for _, p := range phases {
		current = p.name
		t.Logf("phase %q", p.name)
		p.run()
	}
}

// ---- Hooks ----

// hookLog implements every Hook interface and records each call. It is
// safe for concurrent use.
type hookLog struct {
	mu        sync.Mutex
	batches   []kafkasink.BatchInfo
	committed []kafkasink.TransactionInfo
	aborted   []abortedTxn
	rejected  []rejectedEvent
}

type abortedTxn struct {
	info kafkasink.TransactionInfo
	err  error
}

type rejectedEvent struct {
	r            kafkasink.Rejection
	deadLettered bool
}

func (h *hookLog) OnBatchWritten(i kafkasink.BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, i)
}

func (h *hookLog) OnTransactionCommitted(i kafkasink.TransactionInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.committed = append(h.committed, i)
}

func (h *hookLog) OnTransactionAborted(i kafkasink.TransactionInfo, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aborted = append(h.aborted, abortedTxn{i, err})
}

func (h *hookLog) OnEventRejected(r kafkasink.Rejection, deadLettered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, rejectedEvent{r, deadLettered})
}

// snapshot returns copies of everything recorded so far.
func (h *hookLog) snapshot() (batches []kafkasink.BatchInfo, committed []kafkasink.TransactionInfo, aborted []abortedTxn, rejected []rejectedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(batches, h.batches...), append(committed, h.committed...), append(aborted, h.aborted...), append(rejected, h.rejected...)
}

// lastBatch returns what the last successful Write reported.
func (h *hookLog) lastBatch() kafkasink.BatchInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.batches[len(h.batches)-1]
}

// ---- Events and errors ----

// withColumn returns e with column name set to v in its after image
// (added when missing).
func withColumn(e kafkasink.Event, name string, v any) kafkasink.Event {
	e.After = append(kafkasink.Row(nil), e.After...)
	for i := range e.After {
		if e.After[i].Name == name {
			e.After[i].Value = v
			return e
		}
	}
	e.After = append(e.After, kafkasink.Column{Name: name, Value: v})
	return e
}

// streamEvents is the whole deterministic stream crashsink delivers.
func streamEvents(batches, events, keys int) []kafkasink.Event {
	var all []kafkasink.Event
	for b := 1; b <= batches; b++ {
		all = append(all, sinktest.Stream(b, events, keys)...)
	}
	return all
}

// checkRejected checks that err is a *RejectedError holding exactly one
// rejection of e for reason, meant for topic, whose text holds inText.
func checkRejected(t *testing.T, err error, e kafkasink.Event, reason kafkasink.Reason, topic string, inText ...string) kafkasink.Rejection {
	t.Helper()
	var re *kafkasink.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("Write: %v (%T), want a *RejectedError", err, err)
	}
	if kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Errorf("RejectedError classified fatal=%v retryable=%v, want neither", kafkasink.IsFatal(err), kafkasink.IsRetryable(err))
	}
	if len(re.Rejections) != 1 {
		t.Fatalf("%d rejections, want 1: %v", len(re.Rejections), err)
	}
	r := re.Rejections[0]
	if r.Reason != reason || r.Position != e.Position || r.Schema != e.Schema || r.Table != e.Table || r.Topic != topic {
		t.Errorf("rejection %+v, want reason %s, position %s, %s.%s, topic %q", r, reason, e.Position, e.Schema, e.Table, topic)
	}
	for _, want := range inText {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	return r
}

// errorClass names the one class an error of New or Write is in, or
// explains why it is in none or several.
func errorClass(err error) string {
	_, rejected := kafkasink.IsRejected(err)
	classes := map[string]bool{"retryable": kafkasink.IsRetryable(err), "fatal": kafkasink.IsFatal(err), "rejected": rejected}
	var in []string
	for _, c := range []string{"retryable", "fatal", "rejected"} {
		if classes[c] {
			in = append(in, c)
		}
	}
	switch len(in) {
	case 1:
		return in[0]
	case 0:
		return "none"
	}
	return fmt.Sprint(in)
}

// ---- Configuration ----

// validConfig is a Config New accepts; it never connects, because every
// case that uses it fails validation first.
func validConfig() kafkasink.Config {
	return kafkasink.Config{Brokers: []string{"127.0.0.1:9"}, SinkID: "config-test"}
}

// configError calls New and returns its *ConfigError, failing the test when
// New returns anything else.
func configError(t *testing.T, cfg kafkasink.Config) *kafkasink.ConfigError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, cfg)
	if err == nil {
		s.Close(context.Background())
		t.Fatalf("New(%v) succeeded, want a *ConfigError", cfg)
	}
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New: %v (%T), want a *ConfigError", err, err)
	}
	if !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Errorf("IsFatal=%v IsRetryable=%v for a *ConfigError, want true, false", kafkasink.IsFatal(err), kafkasink.IsRetryable(err))
	}
	return ce
}

// checkProblems checks that problems has exactly one entry per want, each
// containing every substring of its want entry.
func checkProblems(t *testing.T, problems []string, want [][]string) {
	t.Helper()
	used := make([]bool, len(problems))
	for _, subs := range want {
		found := false
		for i, p := range problems {
			if used[i] || !containsAll(p, subs) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("no problem mentions %q; problems:\n  %s", subs, strings.Join(problems, "\n  "))
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n  %s", len(problems), len(want), strings.Join(problems, "\n  "))
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// ---- Kafka clients, topics and what a reader sees ----

// admin returns an admin client on brokers, closed at the end of the test.
func admin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(sinktest.Client(t, brokers))
}

// createTopic creates a topic for a test, failing it on any error.
func createTopic(t *testing.T, brokers []string, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfgs := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfgs[k] = &v
	}
	resp, err := admin(t, brokers).CreateTopic(context.Background(), partitions, 1, cfgs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// topicExists asks a new client whether topic exists, with a metadata
// request that does not allow auto-creation: no cached answer, and the
// question itself cannot create the topic.
func topicExists(t *testing.T, brokers []string, topic string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic {
			return rt.ErrorCode == 0
		}
	}
	return false
}

// freshMetadata asks a broker for the metadata of topics, bypassing the
// client's cache: leaders and ISRs change by the second here.
func freshMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl)
}

// waitFullISR waits until every partition of topics has all its replicas
// in sync, so killing the next broker leaves min.insync.replicas met.
func waitFullISR(t *testing.T, cl *kgo.Client, within time.Duration, topics ...string) {
	t.Helper()
	started := time.Now()
	for deadline := started.Add(within); ; time.Sleep(200 * time.Millisecond) {
		resp, err := freshMetadata(ctxT(t), cl, topics...)
		short := ""
		if err != nil {
			short = err.Error()
		} else {
			for _, td := range resp.Topics {
				for _, p := range td.Partitions {
					if (len(p.ISR) < len(p.Replicas) || p.Leader < 0) && short == "" {
						short = fmt.Sprintf("%s[%d] leader %d ISR %v of replicas %v", *td.Topic, p.Partition, p.Leader, p.ISR, p.Replicas)
					}
				}
			}
		}
		if short == "" {
			t.Logf("all replicas of %v in sync after %v", topics, time.Since(started).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas not back in sync within %v: %s", within, short)
		}
	}
}

// onRealBrokers returns the brokers in the variable env
// (sinktest.EnvBrokers or sinktest.EnvBrokers3), or skips t, and the
// test's unique name for its sink ids and topic prefixes. The topics of a
// passed test are deleted at its end, so the shared broker does not pile
// them up; a failed test keeps them for a post-mortem.
func onRealBrokers(t *testing.T, env string) (brokers []string, name string) {
	t.Helper()
	brokers, name = sinktest.RealBrokers(t, env), sinktest.UniqueName(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping topics %s* for a post-mortem", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sinktest.DeleteTopics(ctx, brokers, name)
	})
	return brokers, name
}

// storedCheckpoint is one checkpoint record as a read_committed consumer
// of the checkpoint topic sees it.
type storedCheckpoint struct {
	Position string          `json:"position"`
	Cursor   json.RawMessage `json:"cursor"`
	Mode     string          `json:"mode"`
	SinkID   string          `json:"sink_id"`
}

// sinkCheckpoints returns the committed checkpoint records of sinkID in
// the default checkpoint topic, oldest first. Other sinks of the test may
// share the topic, and a transaction of theirs that is still open holds
// back what a read_committed reader sees, even of records committed before
// the call; so it reads again until it sees at least want records, for up
// to ten seconds, and returns what it saw last.
func sinkCheckpoints(t *testing.T, brokers []string, sinkID string, want int) []storedCheckpoint {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out []storedCheckpoint
		for _, r := range sinktest.ReadCommitted(t, brokers, kafkasink.DefaultCheckpointTopic) {
			if string(r.Key) != sinkID {
				continue
			}
			var c storedCheckpoint
			if err := json.Unmarshal(r.Value, &c); err != nil {
				t.Fatalf("checkpoint record at offset %d: %v", r.Offset, err)
			}
			out = append(out, c)
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkWithExternalReaders reads topic with kcat and with Kafka's Java
// console consumer, both read_committed, and checks each sees every event
// of want exactly once. They need the real broker; against the in-process
// fake cluster the tests use sinktest.ReadCommitted only.
func checkWithExternalReaders(t *testing.T, brokers []string, topic string, want []kafkasink.Event) {
	t.Helper()
	if !sinktest.Has(sinktest.EnvBrokers) {
		t.Log("external readers (kcat, Java console consumer) run against the real broker only: set up scripts/testenv.sh")
		return
	}
	ids := make([]string, len(want))
	for i := range want {
		ids[i] = want[i].ID()
	}
	sinktest.CheckExternalReaders(t, brokers, topic, ids)
}

// ---- The fake cluster held at a request ----

// pauseNext holds the next request of key in the fake broker until release
// is closed, then lets the broker handle it normally. It returns a channel
// closed when the request arrived.
func pauseNext(c *kfake.Cluster, key kmsg.Key, release <-chan struct{}) <-chan struct{} {
	arrived := make(chan struct{})
	var once sync.Once
	c.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(arrived)
			c.SleepControl(func() { <-release })
		}
		c.DropControl()
		return nil, nil, false
	})
	return arrived
}

// writeHeldAt writes events in the background with the next request of
// key (EndTxn: the commit; Produce: the first records) held at the broker
// until release is closed, and returns once that request reached the
// broker; the Write's result arrives on the channel.
func writeHeldAt(t *testing.T, c *kfake.Cluster, s *kafkasink.Sink, key kmsg.Key, events []kafkasink.Event, release <-chan struct{}) <-chan error {
	t.Helper()
	arrived := pauseNext(c, key, release)
	errc := make(chan error, 1)
	go func() { errc <- s.Write(context.Background(), kafkasink.Batch{Events: events}) }()
	select {
	case <-arrived:
	case err := <-errc:
		t.Fatalf("Write returned before its %s request reached the broker: %v", key.Name(), err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s request never reached the broker", key.Name())
	}
	return errc
}

// startProxies starts a fault proxy in front of each of brokers, deciding
// each request's fault with decide; they close at the end of the test.
func startProxies(t *testing.T, brokers []string, decide faultproxy.Decide) *faultproxy.Proxies {
	t.Helper()
	proxies, err := faultproxy.Start(brokers, decide)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxies.Close)
	return proxies
}

// ---- Processes: the crash helper and the test environment's brokers ----

var (
	crashsinkOnce sync.Once
	crashsinkBin  string
	crashsinkErr  error
)

// crashsink builds the crash helper once per test binary.
func crashsink(t *testing.T) string {
	t.Helper()
	crashsinkOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crashsink")
		if err != nil {
			crashsinkErr = err
			return
		}
		crashsinkBin = filepath.Join(dir, "crashsink")
		out, err := exec.Command("go", "build", "-o", crashsinkBin, "./internal/cmd/crashsink").CombinedOutput()
		if err != nil {
			crashsinkErr = fmt.Errorf("building crashsink: %v\n%s", err, out)
		}
	})
	if crashsinkErr != nil {
		t.Fatal(crashsinkErr)
	}
	return crashsinkBin
}

// crashRun is one run of crashsink.
type crashRun struct {
	out      string
	exitCode int  // -1 when killed by a signal
	killed   bool // by SIGKILL
}

func runCrashsink(t *testing.T, ctx context.Context, brokers []string, args ...string) crashRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, crashsink(t), append([]string{"-brokers", strings.Join(brokers, ",")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	r := crashRun{out: out.String()}
	if cmd.ProcessState == nil {
		t.Fatalf("running crashsink: %v", err)
	}
	// A run killed by ctx reports ctx's error, not the exit status: read
	// the status itself.
	r.exitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		r.killed = true
	}
	return r
}

// brokerNodes stops and starts brokers of the test environment through
// scripts/testenv.sh. A node a test killed is started again at its end,
// whatever happened, so the shared environment is left running.
type brokerNodes struct {
	t      *testing.T
	script string
	mu     sync.Mutex
	down   map[int]bool
}

// testenvNodes returns the test environment's brokers to kill and
// restart, or skips t when scripts/testenv.sh is not known.
func testenvNodes(t *testing.T) *brokerNodes {
	t.Helper()
	script := sinktest.Env(t, sinktest.EnvTestenv)[0]
	n := &brokerNodes{t: t, script: script, down: make(map[int]bool)}
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for node := range n.down {
			if out, err := n.run("start-broker", node); err != nil {
				t.Errorf("restarting node %d at the end of the test: %v\n%s", node, err, out)
			}
		}
	})
	return n
}

func (n *brokerNodes) run(cmd string, node int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, n.script, cmd, strconv.Itoa(node)).CombinedOutput()
}

// kill SIGKILLs node (0 the single node, 1-3 the cluster's) and returns
// once the process is gone.
func (n *brokerNodes) kill(node int) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[node] = true
	started := time.Now()
	if out, err := n.run("kill-broker", node); err != nil {
		n.t.Fatalf("kill-broker %d: %v\n%s", node, err, out)
	}
	n.t.Logf("node %d SIGKILLed (%v)", node, time.Since(started).Round(time.Millisecond))
}

// start starts node and returns once it serves requests.
func (n *brokerNodes) start(node int) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	started := time.Now()
	if out, err := n.run("start-broker", node); err != nil {
		n.t.Fatalf("start-broker %d: %v\n%s", node, err, out)
	}
	delete(n.down, node)
	n.t.Logf("node %d restarted (%v)", node, time.Since(started).Round(time.Millisecond))
}
