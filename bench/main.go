// Command bench writes the same change events to Kafka with kafkasink in
// each mode, with raw franz-go, and with the other Go clients a user might
// pick for the job, and prints one table: events/s, MB/s, allocations per
// event, peak RSS, and ratios to raw franz-go (the ceiling). See README.md.
//
// It starts nothing: it uses the brokers of the integration environment
// (KAFKASINK_TEST_BROKERS, from scripts/testenv.sh env) or -brokers, and
// makes and deletes its own topics.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink"
)

// spec is one run: one contender writing Events events in batches of
// Batch, each about Size bytes, to Topic. The parent hands it to a child
// process as JSON in the hidden -child flag.
type spec struct {
	Contender       string
	Brokers         []string
	Topic           string
	CheckpointTopic string
	Compression     string
	Headers         string // the kafkasink.HeaderSet the records carry: all, minimal or none
	Size            int
	Batch           int
	Events          int
	Profile         string // file prefix for CPU and allocation profiles; empty: none
}

// result is what a run measured, printed by the child as one JSON line.
type result struct {
	Events  int
	Bytes   int64 // key, value and header bytes
	Seconds float64
	Mallocs uint64 // heap allocations while writing (Go's only: not librdkafka's)
	RSS     int64  // peak resident set of the process, bytes (0 where /proc is missing)
	// LogBytes is what the run's topic holds on the broker: the record
	// batches as sent (compressed), and transaction markers. The parent
	// measures it after the run.
	LogBytes int64
}

func main() {
	var (
		brokers     = flag.String("brokers", os.Getenv("KAFKASINK_TEST_BROKERS"), "seed brokers, comma separated (default $KAFKASINK_TEST_BROKERS)")
		sizes       = flag.String("sizes", "1024,200", "event sizes in bytes (the JSON value), comma separated")
		batches     = flag.String("batches", "1000,10000", "events per batch, comma separated")
		events      = flag.Int("events", 200000, "events per run (rounded down to whole batches)")
		rounds      = flag.Int("rounds", 3, "alternating rounds; the table shows medians")
		only        = flag.String("only", "", "contenders to run, comma separated (default all): "+names())
		compression = flag.String("compression", "snappy", "compressions, comma separated: each is a column of runs for every contender: none, snappy, lz4, zstd, gzip")
		headers     = flag.String("headers", "all", "kafkasink header sets (Config.Headers), comma separated: all, minimal, none; the pre-encoded contenders send the same headers")
		partitions  = flag.Int("partitions", 6, "partitions of each run's topic")
		profile     = flag.String("profile", "", "directory for each run's CPU and allocation profiles")
		child       = flag.String("child", "", "") // hidden: run one spec in this process
	)
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child))
	}
	if *pgcdcChild != "" {
		os.Exit(runPGCDCChild(*pgcdcChild))
	}
	if *snapshotChild != "" {
		os.Exit(runSnapshotSpec(*snapshotChild))
	}
	if *snapshotMode {
		if err := snapshotMain(sharedFlags{brokers: *brokers, sizes: *sizes, compression: *compression, rounds: *rounds, partitions: *partitions}); err != nil {
			fail(err)
		}
		return
	}
	if *backfillMode {
		if err := backfillMain(sharedFlags{brokers: *brokers, sizes: *sizes, compression: *compression, rounds: *rounds, partitions: *partitions}); err != nil {
			fail(err)
		}
		return
	}
	if err := backfillFlagsUnused(); err != nil {
		fail(err)
	}
	if *pgcdcMode {
		if err := pgcdcMain(sharedFlags{brokers: *brokers, sizes: *sizes, only: *only, compression: *compression, profile: *profile, headers: *headers,
			events: *events, rounds: *rounds, partitions: *partitions}); err != nil {
			fail(err)
		}
		return
	}
	if err := pgcdcFlagsUnused(); err != nil {
		fail(err)
	}
	picked, err := pick(*only)
	if err != nil {
		fail(err)
	}
	if *brokers == "" {
		fail(fmt.Errorf("no brokers: pass -brokers, or load the integration environment with eval \"$(scripts/testenv.sh env)\""))
	}
	cfg := config{
		brokers: strings.Split(*brokers, ","), contenders: picked, events: *events, rounds: *rounds,
		partitions: int32(*partitions), profile: *profile,
	}
	if cfg.sizes, err = ints("-sizes", *sizes); err == nil {
		cfg.batches, err = ints("-batches", *batches)
	}
	if err == nil {
		cfg.compressions, err = splitChecked("-compression", *compression, func(s string) error { _, err := kafkasink.ParseCompression(s); return err })
	}
	if err == nil {
		cfg.headerSets, err = splitChecked("-headers", *headers, func(s string) error { _, err := kafkasink.ParseHeaderSet(s); return err })
	}
	if err != nil {
		fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	res, err := run(ctx, cfg, childRunner(exe), os.Stderr)
	if err != nil {
		fail(err)
	}
	fmt.Print(table(cfg, res))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func names() string {
	var ns []string
	for _, c := range contenders {
		ns = append(ns, c.name)
	}
	return strings.Join(ns, ", ")
}

func pick(only string) ([]contender, error) {
	if only == "" {
		return contenders, nil
	}
	var out []contender
	for _, n := range strings.Split(only, ",") {
		i := slices.IndexFunc(contenders, func(c contender) bool { return c.name == n })
		if i < 0 {
			return nil, fmt.Errorf("-only: unknown contender %q; the contenders are %s", n, names())
		}
		out = append(out, contenders[i])
	}
	return out, nil
}

// splitChecked splits a comma-separated flag value, checking each with valid.
func splitChecked(flagName, s string, valid func(string) error) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if err := valid(f); err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func ints(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runner runs one spec and returns what it measured.
type runner func(ctx context.Context, s spec) (result, error)

// childRunner runs each spec in a child process of exe, so that its peak
// RSS is its own.
func childRunner(exe string) runner {
	return func(ctx context.Context, s spec) (result, error) {
		js, _ := json.Marshal(s)
		cmd := exec.CommandContext(ctx, exe, "-child="+string(js))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return result{}, fmt.Errorf("%s: child process: %w", s.Contender, err)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			return result{}, fmt.Errorf("%s: child printed %q: %w", s.Contender, out, err)
		}
		return r, nil
	}
}

// runChild runs the spec in js and prints its result.
func runChild(js string) int {
	var s spec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		fmt.Fprintln(os.Stderr, "bench -child:", err)
		return 2
	}
	r, err := measure(context.Background(), s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench -child: %s: %v\n", s.Contender, err)
		return 1
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return 0
}

// measure runs s in this process: it builds the workload, starts the
// contender, and times writing every batch.
func measure(ctx context.Context, s spec) (result, error) {
	i := slices.IndexFunc(contenders, func(c contender) bool { return c.name == s.Contender })
	if i < 0 {
		return result{}, fmt.Errorf("unknown contender %q", s.Contender)
	}
	w, err := newWorkload(s)
	if err != nil {
		return result{}, err
	}
	p, err := contenders[i].start(ctx, w)
	if err != nil {
		return result{}, fmt.Errorf("starting: %w", err)
	}
	defer p.close()
	runtime.GC()
	if s.Profile != "" {
		f, err := os.Create(s.Profile + ".cpu")
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for k := range w.batches {
		if err := p.writeBatch(ctx, k); err != nil {
			return result{}, fmt.Errorf("batch %d: %w", k, err)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if s.Profile != "" {
		pprof.StopCPUProfile()
		if f, err := os.Create(s.Profile + ".alloc"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	return result{Events: w.batch * w.batches, Bytes: w.recordBytes() * int64(w.batches), Seconds: elapsed.Seconds(),
		Mallocs: after.Mallocs - before.Mallocs, RSS: peakRSS()}, nil
}

// peakRSS is this process's peak resident set (VmHWM), read from /proc.
// The child reads its own: the rusage a parent gets from wait4 also counts
// the parent's memory at the time of the exec (Go starts children with
// CLONE_VM, so the exec replaces the parent's address space).
func peakRSS() int64 { return procStatus("VmHWM:") }

// procStatus is the field of /proc/self/status named field (with its
// colon), a size in kB there, in bytes; 0 where /proc is missing.
func procStatus(field string) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
