package kafkasink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestRealBrokerFaultsExactlyOnce is the randomized fault checker of issue 8
// against the real 3-node cluster: an exactly-once sink writes a
// deterministic stream through fault-injecting proxies (one per broker),
// under a seeded schedule of faults on every request type it sends,
// SIGSTOP/SIGCONT of a broker, and now and then SIGKILL and restart of one.
// Between faults the sink is restarted the way a process is (Close, or
// abandoned with its network cut, between or in the middle of a Write), and
// the source redelivers from its last acknowledged batch, retrying a batch
// on retryable errors as a correct caller does. Every error New and Write
// return must be retryable (these faults are all transient), or caused by
// the caller's own deadline; any other is a violation, and the loop retries
// it anyway so that the run still checks the data. Each new instance must
// read back a checkpoint at or past the last acknowledged batch. At the end
// a read_committed reader must see every event exactly once, in order per
// key, and a new sink must read back the last batch's position and cursor.
//
// Knobs: KAFKASINK_REALFAULTS_SEED replays a seed (logged at the start;
// timing still varies, so a replay repeats the schedule, not every
// interleaving); KAFKASINK_REALFAULTS_FAULTS is how many faults to apply
// (default 100), KAFKASINK_REALFAULTS_BUDGET the time after which no new
// fault is started (default 70s), KAFKASINK_REALFAULTS_KILLS the most
// broker SIGKILLs (default 1). A soak: FAULTS=300 BUDGET=10m KILLS=4, with
// -timeout 25m. A killed broker is restarted once the controller has fenced
// it; KAFKASINK_REALFAULTS_FAST_RESTART=1 restarts it at once (see
// waitFenced for what Kafka 4.4 then does).
//
// On even seeds each instance has a Config.Guard that refuses once the
// instance is retired, as a lease's does: the newest instance then claims
// its transactional id afresh where the broker fenced it without a newer
// one (its timeout abort, an older instance's recovery).
//
// Only cluster nodes 1..3 are ever signalled, never node 0 (the single
// node others use); every node stopped or killed is resumed or restarted
// in t.Cleanup, whatever happened.
func TestRealBrokerFaultsExactlyOnce(t *testing.T) {
	skipInShort(t, "a seeded fault run of about 70 s on the real cluster")
	// Not parallel: it stops cluster nodes; see helpers_test.go.
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers3)
	nodes := testenvNodes(t)
	knobs := loadRealFaultKnobs(t)
	t.Logf("seed %d (replay: KAFKASINK_REALFAULTS_SEED=%d), %d faults within %v, at most %d broker kills, Config.Guard %t (even seeds)",
		knobs.seed, knobs.seed, knobs.faults, knobs.budget, knobs.kills, knobs.seed%2 == 0)
	r := newRealFaultRun(t, brokers, name, nodes, knobs)
	runPhases(t,
		phase{"apply faults while writing", r.applyFaults},
		phase{"drain without faults", r.drain},
		phase{"check what a reader and a new sink see", r.check},
	)
}

// realFaultKnobs are the test's environment knobs.
type realFaultKnobs struct {
	seed        uint64
	faults      int
	budget      time.Duration
	kills       int
	fastRestart bool // restart a killed broker before the controller fences it
}

// loadRealFaultKnobs reads the knobs from the environment.
func loadRealFaultKnobs(t *testing.T) realFaultKnobs {
	return realFaultKnobs{
		seed:        knob(t, "KAFKASINK_REALFAULTS_SEED", uint64(time.Now().UnixNano()), parseSeed),
		faults:      knob(t, "KAFKASINK_REALFAULTS_FAULTS", 100, strconv.Atoi),
		budget:      knob(t, "KAFKASINK_REALFAULTS_BUDGET", 70*time.Second, time.ParseDuration),
		kills:       knob(t, "KAFKASINK_REALFAULTS_KILLS", 1, strconv.Atoi),
		fastRestart: knob(t, "KAFKASINK_REALFAULTS_FAST_RESTART", false, func(s string) (bool, error) { return s == "1", nil }),
	}
}

// realFaultAPIs are the requests the sink sends that faults target.
// Start-up requests are armed right before a restart, so that one comes.
// AddPartitionsToTxn is not among them: against Kafka 4.x the client uses
// transaction version 2 (EndTxn v5), where a Produce adds its partition to
// the transaction itself (KIP-890), and the sink sends none; the run's
// request counts show it.
var realFaultAPIs = []struct {
	key     kmsg.Key
	startup bool // sent mostly while New runs
	maxSkip int  // the fault hits one of the first maxSkip+1 such requests
}{
	{kmsg.Produce, false, 4},
	{kmsg.EndTxn, false, 2},
	{kmsg.Metadata, false, 2},
	{kmsg.InitProducerID, true, 0},
	{kmsg.FindCoordinator, true, 0},
	{kmsg.ListOffsets, true, 0},
	{kmsg.Fetch, true, 1},
}

// armedFault is a proxy fault waiting for its requests: after skipping
// skip requests of its api, on any proxy, it hits the next burst ones (the
// client's own retries of a request included), or with an outage every one
// until the outage ends. With after set it waits until that fault hit.
type armedFault struct {
	key    kmsg.Key
	skip   int
	burst  int
	outage time.Duration // from the first hit; 0 for none
	fault  faultproxy.Fault
	after  *armedFault

	what  string // as armed
	until time.Time
	fired bool
	done  bool
}

func (a *armedFault) String() string { return a.what }

func (a *armedFault) describe() string {
	what := fmt.Sprintf("%s on %s requests %d..%d", a.fault, a.key.Name(), a.skip+1, a.skip+a.burst)
	if a.outage > 0 {
		what = fmt.Sprintf("%s on every %s request for %v from request %d", a.fault, a.key.Name(), a.outage, a.skip+1)
	}
	if a.after != nil {
		what += " once the fault before hit"
	}
	return what
}

// hit says whether the fault applies to the next request of its api.
func (a *armedFault) hit(now time.Time) bool {
	if a.skip > 0 {
		a.skip--
		return false
	}
	if a.outage > 0 {
		if !a.fired {
			a.until = now.Add(a.outage)
		} else if now.After(a.until) {
			a.done = true
			return false
		}
	} else {
		a.burst--
		a.done = a.burst == 0
	}
	a.fired = true
	return true
}

// faultSchedule is the proxies' Decide: it applies the armed faults, and
// counts every request the sink sends.
type faultSchedule struct {
	mu    sync.Mutex
	seen  map[string]int // every request, by api
	armed []*armedFault
}

func (s *faultSchedule) decide(r faultproxy.Request) faultproxy.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[r.API()]++
	now := time.Now()
	for _, a := range s.armed {
		if a.done || r.Key != a.key.Int16() || (a.after != nil && !a.after.fired) {
			continue
		}
		if a.hit(now) {
			return a.fault
		}
	}
	return faultproxy.Fault{}
}

func (s *faultSchedule) arm(faults ...*armedFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range faults {
		a.what = a.describe()
	}
	s.armed = faults
}

// disarm ends the armed faults and returns those that hit no request.
func (s *faultSchedule) disarm() (unfired []*armedFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.armed {
		if !a.fired {
			unfired = append(unfired, a)
		}
	}
	s.armed = nil
	return unfired
}

// requests returns how many requests of each api the sink sent.
func (s *faultSchedule) requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.seen)
}

// brokerPauser stops and resumes cluster nodes with SIGSTOP/SIGCONT.
// testenv.sh's kill-broker waits for the process to exit, which a stopped
// one never does, so the pid comes from the node's pid file, checked as
// testenv.sh checks it.
type brokerPauser struct {
	t      *testing.T
	dir    string
	mu     sync.Mutex
	paused map[int]int // node -> pid
}

func newBrokerPauser(t *testing.T) *brokerPauser {
	dir := sinktest.Env(t, sinktest.EnvDir)[0] // SIGSTOP of a cluster node needs its pid file there
	p := &brokerPauser{t: t, dir: dir, paused: make(map[int]int)}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for node, pid := range p.paused {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("resuming node %d (pid %d) at the end of the test: %v", node, pid, err)
			}
		}
	})
	return p
}

func (p *brokerPauser) pid(node int) (int, error) {
	if node < 1 || node > 3 {
		return 0, fmt.Errorf("node %d is not a cluster node (1..3): the single node is never touched", node)
	}
	b, err := os.ReadFile(filepath.Join(p.dir, "kafka-"+strconv.Itoa(node), "pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file of node %d: %w", node, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), p.dir) {
		return 0, fmt.Errorf("pid %d of node %d is not a broker of %s (%v)", pid, node, p.dir, err)
	}
	return pid, nil
}

// pause stops node for d. A detached shell resumes it after d as well, so
// even a test binary killed by its timeout leaves no broker stopped.
func (p *brokerPauser) pause(node int, d time.Duration) {
	p.t.Helper()
	pid, err := p.pid(node)
	if err != nil {
		p.t.Fatalf("pausing node %d: %v", node, err)
	}
	watchdog := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", (d+time.Second).Seconds(), pid))
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watchdog.Start(); err != nil {
		p.t.Fatalf("starting the SIGCONT watchdog of node %d: %v", node, err)
	}
	go watchdog.Wait()
	p.mu.Lock()
	p.paused[node] = pid
	p.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		p.t.Fatalf("SIGSTOP node %d (pid %d): %v", node, pid, err)
	}
	time.Sleep(d)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		p.t.Fatalf("SIGCONT node %d (pid %d): %v", node, pid, err)
	}
	p.mu.Lock()
	delete(p.paused, node)
	p.mu.Unlock()
}

// sinkInstance is one "process" of the sink: the sink and the proxies that
// are its network. Retiring it without Close cuts that network for good,
// as a process's death does.
type sinkInstance struct {
	n       int
	s       *kafkasink.Sink
	proxies *faultproxy.Proxies
	// retired is set when the instance ends; from then on its
	// Config.Guard (on even seeds) refuses, as a lease's does.
	retired atomic.Bool
}

// restart styles: how an instance ends before the next one starts.
const (
	restartClose        = "close"
	restartAbandon      = "abandon between writes"
	restartAbandonWrite = "abandon mid-write"
)

// realFaultRun is the state of one run of the checker.
type realFaultRun struct {
	t         *testing.T
	ctx       context.Context // the budget, and five minutes more to drain
	knobs     realFaultKnobs
	rng       *rand.Rand
	brokers   []string // direct, for the test's own clients
	upstreams []string // the brokers as they advertise themselves
	nodes     *brokerNodes
	pauser    *brokerPauser
	adm       *kadm.Client
	sched     *faultSchedule
	name      string
	config    func(*kafkasink.Config)
	topic     string
	ckTopic   string
	start     time.Time

	// The source: batch b is sinktest.Stream(b, sizes[b], keys).
	sizes      map[int]int
	acked      int // last batch whose Write returned nil
	maxStarted int // last batch any Write was given

	cur       *sinkInstance
	fresh     bool // cur has written nothing yet
	instances int
	closing   sync.WaitGroup // closing abandoned instances

	proxyLog   []faultproxy.Applied // of retired instances
	proxyCount map[faultproxy.Count]int
	signals    map[string]int // broker signals sent, by kind
	unfired    map[string]int
	restarts   map[string]int
	errClasses map[string]int
	violations []string

	logMu   sync.Mutex // the sinks log from their own goroutines
	log     []string
	sinkLog map[string]int // the sinks' log messages, by level and text
}

const realFaultKeys = 13

func newRealFaultRun(t *testing.T, brokers []string, name string, nodes *brokerNodes, knobs realFaultKnobs) *realFaultRun {
	r := &realFaultRun{
		t: t, knobs: knobs, rng: rand.New(rand.NewPCG(knobs.seed, knobs.seed^0x9e3779b97f4a7c15)),
		brokers: brokers, nodes: nodes, pauser: newBrokerPauser(t), adm: admin(t, brokers),
		sched: &faultSchedule{seen: make(map[string]int)}, name: name,
		topic: name + ".public.items", ckTopic: name + ".checkpoints",
		sizes: make(map[int]int), proxyCount: make(map[faultproxy.Count]int), signals: make(map[string]int),
		unfired: make(map[string]int), restarts: make(map[string]int), errClasses: make(map[string]int),
		sinkLog: make(map[string]int),
	}
	ctx, cancel := context.WithTimeout(context.Background(), knobs.budget+5*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.config = func(c *kafkasink.Config) {
		c.CheckpointTopic = r.ckTopic
		c.TransactionTimeout = 10 * time.Second
		c.MaxTransactionRecords = 100
		c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}}
	}
	meta, err := r.adm.BrokerMetadata(ctxT(t))
	if err != nil {
		t.Fatalf("broker metadata: %v", err)
	}
	for _, b := range meta.Brokers {
		r.upstreams = append(r.upstreams, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	if len(r.upstreams) != 3 {
		t.Fatalf("the cluster has brokers %v, want nodes 1..3: is the 3-node cluster fully up?", meta.Brokers)
	}
	t.Cleanup(func() {
		r.closing.Wait()
		if r.cur != nil {
			r.closeQuietly(r.cur)
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("seed %d (replay: KAFKASINK_REALFAULTS_SEED=%d), failed=%t; the run:", knobs.seed, knobs.seed, t.Failed())
			r.logMu.Lock()
			for _, l := range r.log {
				t.Log(l)
			}
			r.logMu.Unlock()
		}
	})
	return r
}

func (r *realFaultRun) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.log = append(r.log, fmt.Sprintf("%7.3fs ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
}

// sinkLogTap is the Logger of each sink instance: its records go into the
// run's log and tally, so a run shows which recovery paths the sink took
// (the sink logs at Info and above only its own decisions; the Kafka
// client's info lines arrive at Debug, its warnings at Warn).
type sinkLogTap struct {
	run      *realFaultRun
	instance int
}

func (h *sinkLogTap) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *sinkLogTap) Handle(_ context.Context, rec slog.Record) error {
	var attrs strings.Builder
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&attrs, " %s=%v", a.Key, a.Value)
		return true
	})
	h.run.logf("instance %d log: %s %s%s", h.instance, rec.Level, rec.Message, attrs.String())
	h.run.logMu.Lock()
	h.run.sinkLog[rec.Level.String()+" "+rec.Message]++
	h.run.logMu.Unlock()
	return nil
}

// WithAttrs drops the attributes: the only one is the sink id, the same
// for every instance.
func (h *sinkLogTap) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *sinkLogTap) WithGroup(string) slog.Handler { return h }

// sinkLogTally is a copy of the sinks' log tally: instances abandoned by
// the run may still be closing, and logging, while the test reports it.
func (r *realFaultRun) sinkLogTally() map[string]int {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return maps.Clone(r.sinkLog)
}

// violation reports a broken invariant; test goroutine only.
func (r *realFaultRun) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	r.violations = append(r.violations, v)
	r.logf("VIOLATION: %s", v)
	r.t.Error(v)
}

// batch returns batch b of the source, the same every time it is asked.
func (r *realFaultRun) batch(b int) kafkasink.Batch {
	size, ok := r.sizes[b]
	if !ok {
		size = 1 + r.rng.IntN(300)
		r.sizes[b] = size
	}
	return kafkasink.Batch{Events: sinktest.Stream(b, size, realFaultKeys), Cursor: json.RawMessage(`{"batch":` + strconv.Itoa(b) + `}`)}
}

func (r *realFaultRun) lastPosition(b int) kafkasink.Position {
	if b == 0 {
		return kafkasink.Position{}
	}
	e := r.batch(b).Events
	return e[len(e)-1].Position
}

// startInstance starts the next sink "process" behind new proxies,
// retrying New as a supervisor would, and checks the checkpoint it read
// back against what the source knows.
func (r *realFaultRun) startInstance(ctx context.Context) {
	r.instances++
	proxies, err := faultproxy.Start(r.upstreams, r.sched.decide)
	if err != nil {
		r.t.Fatal(err)
	}
	in := &sinkInstance{n: r.instances, proxies: proxies}
	started := time.Now()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cfg := kafkasink.Config{Brokers: proxies.Addrs(), SinkID: r.name, Logger: slog.New(&sinkLogTap{run: r, instance: in.n})}
		r.config(&cfg)
		if r.knobs.seed%2 == 0 {
			cfg.Guard = func() error {
				if in.retired.Load() {
					return errors.New("realfaults: a newer instance holds the lease")
				}
				return nil
			}
		}
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := kafkasink.New(nctx, cfg)
		cancel()
		if err == nil {
			in.s = s
			break
		}
		class := r.classify("New", err, nctx.Err() != nil && errors.Is(err, nctx.Err()))
		r.logf("instance %d: New attempt %d: %s: %v", in.n, attempt, class, err)
		if ctx.Err() != nil || time.Since(started) > 2*time.Minute {
			r.t.Fatalf("instance %d: New still failing after %d attempts (%v): %v", in.n, attempt, time.Since(started).Round(time.Millisecond), err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
	r.cur, r.fresh = in, true
	ck := in.s.Checkpoint()
	r.logf("instance %d started in %v: checkpoint %s cursor %s (source acked batch %d, ends at %s; started up to batch %d, ends at %s)",
		in.n, time.Since(started).Round(time.Millisecond), ck.Position, ck.Cursor, r.acked, r.lastPosition(r.acked), r.maxStarted, r.lastPosition(r.maxStarted))
	if ck.Position.Compare(r.lastPosition(r.acked)) < 0 {
		r.violation("instance %d read back checkpoint %s, below acknowledged batch %d's last event %s: acknowledged data is not covered",
			in.n, ck.Position, r.acked, r.lastPosition(r.acked))
	}
	if ck.Position.Compare(r.lastPosition(r.maxStarted)) > 0 {
		r.violation("instance %d read back checkpoint %s, beyond anything written (batch %d ends at %s)",
			in.n, ck.Position, r.maxStarted, r.lastPosition(r.maxStarted))
	}
}

// retire ends the current instance in the given style. Abandoning cuts
// its network: from then on it reaches no broker, as a dead process does
// not; it is then closed in the background, as a dead process's sockets
// and goroutines are gone too.
func (r *realFaultRun) retire(style string) {
	in := r.cur
	in.retired.Store(true)
	r.cur = nil
	r.restarts[style]++
	if style == restartClose {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := in.s.Close(ctx)
		cancel()
		r.logf("instance %d closed: %v", in.n, err)
	} else {
		r.logf("instance %d abandoned (%s): network cut", in.n, style)
	}
	in.proxies.Close()
	r.collect(in)
	if style != restartClose {
		r.closing.Go(func() { r.closeQuietly(in) })
	}
}

// collect adds an instance's proxy faults to the run's.
func (r *realFaultRun) collect(in *sinkInstance) {
	for _, a := range in.proxies.Applied() {
		r.proxyLog = append(r.proxyLog, a)
		r.proxyCount[faultproxy.Count{API: a.Request.API(), Kind: a.Fault.Kind}]++
	}
	if err := in.proxies.Err(); err != nil {
		r.violation("instance %d: the proxies themselves failed (a test defect): %v", in.n, err)
	}
}

// closeQuietly releases an instance whose network is cut.
func (r *realFaultRun) closeQuietly(in *sinkInstance) {
	in.proxies.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in.s.Close(ctx)
}

// classify counts an error by class (errorClass), and reports one that is
// not retryable: under transient faults nothing else is right, except an
// error caused by the caller's own context ending, which is in no class.
func (r *realFaultRun) classify(call string, err error, ownContext bool) string {
	class := errorClass(err)
	switch {
	case class == "retryable":
	case class == "none" && ownContext:
		class = "caller's context"
	default:
		r.violation("%s returned an error in class %s under transient faults: %v", call, class, err)
	}
	r.errClasses[call+" "+class]++
	return class
}

// stepWrites is what the writer goroutine of a step reports; it logs
// into the run's log as it goes.
type stepWrites struct {
	logf       func(format string, args ...any)
	errs       []writeErr
	violations []string
	acked      int
	abandoned  bool
}

// writeErr is one failed Write, and whether the caller's own deadline
// ended it.
type writeErr struct {
	err        error
	ownContext bool
}

func (w *stepWrites) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	w.violations = append(w.violations, v)
	w.logf("VIOLATION: %s", v)
}

// deliver writes batch b until a Write returns nil, retrying the same
// batch with backoff, as a correct caller does. It returns early, false,
// when ctx ends (the instance was abandoned mid-write).
func deliver(ctx context.Context, in *sinkInstance, b int, batch kafkasink.Batch, w *stepWrites) bool {
	last := batch.Events[len(batch.Events)-1].Position
	backoff := 100 * time.Millisecond
	started := time.Now()
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := in.s.Write(wctx, batch)
		cancel()
		if ctx.Err() != nil {
			w.logf("instance %d batch %d attempt %d: abandoned mid-write: %v", in.n, b, attempt, err)
			return false
		}
		if err == nil {
			// A batch sent again after a later one was (partly)
			// delivered leaves the checkpoint beyond it.
			if got := in.s.Checkpoint().Position; got.Compare(last) < 0 {
				w.violation("instance %d batch %d: Write returned nil with the checkpoint at %s, below the batch's last event %s: a silent partial write", in.n, b, got, last)
			}
			if attempt > 1 {
				w.logf("instance %d batch %d (%d events) delivered on attempt %d after %v", in.n, b, len(batch.Events), attempt, time.Since(started).Round(time.Millisecond))
			}
			return true
		}
		w.errs = append(w.errs, writeErr{err: err, ownContext: wctx.Err() != nil && errors.Is(err, wctx.Err())})
		w.logf("instance %d batch %d attempt %d: %v", in.n, b, attempt, err)
		if time.Since(started) > 2*time.Minute {
			w.violation("instance %d batch %d still failing after %d attempts in %v", in.n, b, attempt, time.Since(started).Round(time.Millisecond))
			return false
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// writeBatches delivers batches from..to on the current instance in a
// goroutine, so the test goroutine can signal brokers meanwhile.
func (r *realFaultRun) writeBatches(ctx context.Context, from, to int) <-chan *stepWrites {
	in := r.cur
	batches := make([]kafkasink.Batch, 0, to-from+1)
	for b := from; b <= to; b++ {
		batches = append(batches, r.batch(b))
	}
	r.maxStarted = max(r.maxStarted, to)
	done := make(chan *stepWrites, 1)
	go func() {
		w := &stepWrites{logf: r.logf, acked: from - 1}
		for i, batch := range batches {
			if !deliver(ctx, in, from+i, batch, w) {
				w.abandoned = ctx.Err() != nil
				break
			}
			w.acked = from + i
		}
		done <- w
	}()
	return done
}

// absorb takes a step's writes into the run: its errors classified, its
// violations.
func (r *realFaultRun) absorb(w *stepWrites) {
	for _, e := range w.errs {
		r.classify("Write", e.err, e.ownContext)
	}
	for _, v := range w.violations {
		r.violations = append(r.violations, v)
		r.t.Error(v)
	}
	r.acked = max(r.acked, w.acked)
}

// resumePoint is the batch a source resuming from ck starts with: the
// one ck is in the middle of, or the next.
func (r *realFaultRun) resumePoint(ck kafkasink.Checkpoint) int {
	if ck.Position.IsZero() {
		return 1
	}
	b := int(ck.Position.LSN / 16) // sinktest.Stream's batch b commits at LSN b*16
	if ck.Position == r.lastPosition(b) {
		return b + 1
	}
	return b
}

// applied counts the faults applied so far: the signals sent, and the
// proxy faults that took effect (a response to drop that never came, as
// its connection died first, is not one).
func (r *realFaultRun) applied() int {
	n := len(r.proxyLog)
	for _, k := range r.signals {
		n += k
	}
	if r.cur != nil {
		n += len(r.cur.proxies.Applied())
	}
	return n
}

// waitFenced waits until the controller has fenced a killed node and
// moved every leadership of the sink's topics and of __transaction_state
// off it. A node restarted sooner comes back as leader at its old leader
// epoch, and Kafka 4.4 then lets it act on log entries no other replica
// has: in one run (seed 1796071394894510862) the restarted transaction
// coordinator completed a commit from its unreplicated PrepareCommit on
// three partitions, then lost leadership to a replica without that record,
// which aborted the same transaction on the fourth: read_committed lost 39
// records the checkpoint said were committed. No client can guard against
// that, so only KAFKASINK_REALFAULTS_FAST_RESTART=1 restarts that fast.
func (r *realFaultRun) waitFenced(node int) {
	cl := sinktest.Client(r.t, r.brokers)
	started := time.Now()
	for deadline := started.Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := freshMetadata(ctxT(r.t), cl, r.topic, r.ckTopic, "__transaction_state")
		if err != nil {
			continue
		}
		leads := false
		for _, td := range resp.Topics {
			for _, p := range td.Partitions {
				leads = leads || int(p.Leader) == node
			}
		}
		if !leads {
			r.logf("node %d led nothing any more after %v", node, time.Since(started).Round(time.Millisecond))
			return
		}
	}
	r.t.Fatalf("node %d still led partitions 60s after its SIGKILL", node)
}

// pickVictim chooses a cluster node to signal: the sink's transaction
// coordinator, the checkpoint partition's leader, or any node; always one
// of the cluster's nodes 1..3, never the single node 0 others use.
func (r *realFaultRun) pickVictim() (int, string) {
	isClusterNode := func(id int32) bool { return id >= 1 && id <= 3 }
	switch r.rng.IntN(3) {
	case 0:
		txnID := "kafkasink-" + r.name
		if c, ok := r.adm.FindTxnCoordinators(ctxT(r.t), txnID)[txnID]; ok && c.Err == nil && isClusterNode(c.NodeID) {
			return int(c.NodeID), "transaction coordinator"
		}
	case 1:
		if md, err := r.adm.Metadata(ctxT(r.t), r.ckTopic); err == nil {
			if p, ok := md.Topics[r.ckTopic].Partitions[0]; ok && isClusterNode(p.Leader) {
				return int(p.Leader), "checkpoint leader"
			}
		}
	}
	return 1 + r.rng.IntN(3), "any node"
}

// faultStep is one step of the run: how the current instance ends, and
// the fault applied while the source writes.
type faultStep struct {
	restart    string // "", or how the instance ends before (close, abandon) or during (abandon mid-write) the writes
	what       string // the fault, for the log
	signal     func() // a broker signal sent during the writes, or nil
	signalKind string
}

// applyFaults runs steps until the run has applied its faults or spent its
// budget: each step may restart the instance, arms a proxy fault or
// signals a broker, and writes while it happens.
func (r *realFaultRun) applyFaults() {
	r.start = time.Now()
	r.startInstance(r.ctx)
	kills := 0
	for step := 1; r.applied() < r.knobs.faults && time.Since(r.start) < r.knobs.budget; step++ {
		st := r.planStep(&kills)
		if st.restart == restartClose || st.restart == restartAbandon {
			r.retire(st.restart)
			r.startInstance(r.ctx)
		}
		r.writeThrough(step, st)
	}
	r.sched.disarm()
	r.logf("faults done after %v: %d applied", time.Since(r.start).Round(time.Millisecond), r.applied())
}

// planStep draws a step from the seed. The order of the draws is the
// schedule a seed replays: keep it.
func (r *realFaultRun) planStep(kills *int) faultStep {
	var st faultStep
	switch p := r.rng.Float64(); {
	case p < 0.2:
		st.restart = restartClose
	case p < 0.4:
		st.restart = restartAbandon
	}

	var armed []*armedFault
	switch p := r.rng.Float64(); {
	case p < 0.06 && *kills < r.knobs.kills && time.Since(r.start) < r.knobs.budget-30*time.Second:
		*kills++
		st.what, st.signal = r.planKill()
		st.signalKind = "SIGKILL+restart"
	case p < 0.22:
		st.what, st.signal = r.planPause()
		st.signalKind = "SIGSTOP/SIGCONT"
	case p < 0.34:
		armed = r.planLostAnswerThenOutage()
	default:
		var startup bool
		armed, startup = r.planRequestFault()
		if startup && st.restart == "" {
			st.restart = restartClose
		}
	}
	if armed != nil {
		r.sched.arm(armed...)
		var parts []string
		for _, a := range armed {
			parts = append(parts, a.String())
		}
		st.what = "proxy: " + strings.Join(parts, ", then ")
	}
	if st.restart == "" && r.rng.IntN(8) == 0 {
		st.restart = restartAbandonWrite // chosen here, done during the writes
	}
	return st
}

// planKill picks a node to SIGKILL and restart during the writes.
func (r *realFaultRun) planKill() (what string, signal func()) {
	node, role := r.pickVictim()
	what = fmt.Sprintf("SIGKILL node %d (%s)", node, role)
	downFor := time.Duration(500+r.rng.IntN(3000)) * time.Millisecond
	return what, func() {
		r.nodes.kill(node)
		if !r.knobs.fastRestart {
			r.waitFenced(node)
		}
		time.Sleep(downFor)
		r.nodes.start(node)
		waitFullISR(r.t, sinktest.Client(r.t, r.brokers), 90*time.Second, r.topic, r.ckTopic, "__transaction_state")
	}
}

// planPause picks a node to SIGSTOP for a while during the writes.
func (r *realFaultRun) planPause() (what string, signal func()) {
	node, role := r.pickVictim()
	d := time.Duration(300+r.rng.IntN(2700)) * time.Millisecond
	return fmt.Sprintf("SIGSTOP node %d (%s) for %v", node, role, d), func() { r.pauser.pause(node, d) }
}

// planLostAnswerThenOutage arms a commit or produce the broker applied
// but whose answer is lost, then an outage of a start-up request, so that
// the sink's recovery (which reads the checkpoint back) fails, perhaps
// more than once, before it succeeds. A burst: the client retries a lost
// answer itself.
func (r *realFaultRun) planLostAnswerThenOutage() []*armedFault {
	first := &armedFault{key: kmsg.EndTxn, skip: r.rng.IntN(3), burst: 2 + r.rng.IntN(3), fault: faultproxy.Fault{Kind: faultproxy.DropResponse}}
	if r.rng.IntN(3) == 0 {
		first.key, first.skip = kmsg.Produce, r.rng.IntN(5)
	}
	startup := []kmsg.Key{kmsg.InitProducerID, kmsg.FindCoordinator, kmsg.Metadata, kmsg.ListOffsets, kmsg.Fetch}
	kind := []faultproxy.Kind{faultproxy.CutBefore, faultproxy.DropResponse}[r.rng.IntN(2)]
	then := &armedFault{key: startup[r.rng.IntN(len(startup))], outage: time.Duration(1000+r.rng.IntN(5000)) * time.Millisecond,
		fault: faultproxy.Fault{Kind: kind}, after: first}
	return []*armedFault{first, then}
}

// planRequestFault arms one fault of any kind on one api the sink sends,
// and says whether that api is sent mostly at start-up (then a restart
// must come for it to hit).
func (r *realFaultRun) planRequestFault() (armed []*armedFault, startup bool) {
	api := realFaultAPIs[r.rng.IntN(len(realFaultAPIs))]
	a := &armedFault{key: api.key, skip: r.rng.IntN(api.maxSkip + 1), burst: 1,
		fault: faultproxy.Fault{Kind: faultproxy.Kinds[r.rng.IntN(len(faultproxy.Kinds))]}}
	if a.fault.Kind == faultproxy.DelayRequest || a.fault.Kind == faultproxy.DelayResponse {
		a.fault.Delay = time.Duration(50+r.rng.IntN(1500)) * time.Millisecond
		if r.rng.IntN(6) == 0 { // past the commit timeout (a third of 10s)
			a.fault.Delay = time.Duration(3500+r.rng.IntN(3000)) * time.Millisecond
		}
	}
	// Mostly one request; often the client's retries too, and
	// sometimes every request for seconds (longer than the
	// commit timeout), so that the failure reaches the sink.
	switch p := r.rng.Float64(); {
	case p < 0.25:
		a.burst = 2 + r.rng.IntN(3)
	case p < 0.5 && a.fault.Delay == 0:
		a.outage = time.Duration(1000+r.rng.IntN(5000)) * time.Millisecond
	}
	return []*armedFault{a}, api.startup
}

// redeliveryRange is what the source writes in a step: from its last
// acknowledged batch, and now and then from the one before (acknowledged
// batches sent again); after a restart, half the time from the checkpoint
// the new instance read back, as pgcdc does.
func (r *realFaultRun) redeliveryRange() (from, to int) {
	from = r.acked + 1
	switch {
	case r.fresh && r.rng.IntN(2) == 0:
		from = r.resumePoint(r.cur.s.Checkpoint())
		r.acked = max(r.acked, from-1)
	case r.acked > 0 && r.rng.IntN(7) == 0:
		from = r.acked
	}
	r.fresh = false
	return from, max(from, r.maxStarted) + r.rng.IntN(3)
}

// writeThrough writes a step's batches while its fault happens, then
// takes in what the writes saw and disarms what is left of the fault.
func (r *realFaultRun) writeThrough(step int, st faultStep) {
	from, to := r.redeliveryRange()
	r.logf("step %d: %s; restart %q; batches %d..%d", step, st.what, st.restart, from, to)
	wctx, wcancel := context.WithCancel(r.ctx)
	done := r.writeBatches(wctx, from, to)
	if st.signal != nil {
		time.Sleep(time.Duration(r.rng.IntN(300)) * time.Millisecond)
		st.signal()
		r.signals[st.signalKind]++
	}
	if st.restart == restartAbandonWrite {
		time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
		r.cur.proxies.Close() // the network dies first, then the process
		wcancel()
	}
	w := <-done
	wcancel()
	r.absorb(w)
	for _, a := range r.sched.disarm() {
		r.unfired[a.key.Name()]++
		r.logf("step %d: %s hit no request", step, a)
	}
	if st.restart == restartAbandonWrite {
		r.retire(restartAbandonWrite)
		r.startInstance(r.ctx)
	} else if !w.abandoned && w.acked < to {
		r.t.Fatalf("step %d: batch %d could not be delivered; see the run log", step, w.acked+1)
	}
}

// drain delivers, with no faults, everything any Write was given, then
// one more batch.
func (r *realFaultRun) drain() {
	r.retire(restartClose)
	r.startInstance(r.ctx)
	final := r.maxStarted + 1
	r.absorb(<-r.writeBatches(r.ctx, r.acked+1, final))
	if r.acked != final {
		r.t.Fatalf("the drain without faults delivered up to batch %d of %d", r.acked, final)
	}
	r.retire(restartClose)
}

func (r *realFaultRun) check() {
	t := r.t
	var want []kafkasink.Event
	for b := 1; b <= r.acked; b++ {
		want = append(want, r.batch(b).Events...)
	}
	s := newSink(t, r.brokers, r.name, r.config)
	if got := s.Checkpoint(); got.Position != r.lastPosition(r.acked) || string(got.Cursor) != `{"batch":`+strconv.Itoa(r.acked)+`}` {
		r.violation("a new sink read back checkpoint %s cursor %s, want %s cursor {\"batch\":%d}", got.Position, got.Cursor, r.lastPosition(r.acked), r.acked)
	}
	records := sinktest.ReadCommitted(t, r.brokers, r.topic)

	counts := make([]string, 0, len(r.proxyCount))
	for c, n := range r.proxyCount {
		counts = append(counts, fmt.Sprintf("%s %s: %d", c.API, c.Kind, n))
	}
	slices.Sort(counts)
	t.Logf("seed %d: %d faults applied in %v: %d proxy faults, signals %v; %d batches, %d events, %d records read back; %d sink instances, restarts %v",
		r.knobs.seed, r.applied(), time.Since(r.start).Round(time.Millisecond), len(r.proxyLog), r.signals, r.acked, len(want), len(records), r.instances, r.restarts)
	t.Logf("proxy faults by type: %s", strings.Join(counts, "; "))
	t.Logf("armed faults that hit no request, by api: %v", r.unfired)
	t.Logf("requests the sink sent through the proxies, by api: %v", r.sched.requests())
	t.Logf("errors by call and class: %v", r.errClasses)
	t.Logf("the sinks' log messages: %v", r.sinkLogTally())
	sinktest.CheckExactlyOnce(t, records, want)
	if len(r.violations) > 0 {
		t.Errorf("%d invariant violations (seed %d)", len(r.violations), r.knobs.seed)
	}
}
