package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the child process the suite
// re-executes for each run.
func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if js, ok := strings.CutPrefix(a, "-child="); ok {
			os.Exit(runChild(js))
		}
		if js, ok := strings.CutPrefix(a, "-pgcdc-child="); ok {
			os.Exit(runPGCDCChild(js))
		}
		if js, ok := strings.CutPrefix(a, "-snapshot-child="); ok {
			os.Exit(runSnapshotSpec(js))
		}
	}
	os.Exit(m.Run())
}

func testConfig(t *testing.T) config {
	brokers := os.Getenv("KAFKASINK_TEST_BROKERS")
	if brokers == "" {
		t.Skip("KAFKASINK_TEST_BROKERS is not set: load the integration environment with eval \"$(scripts/testenv.sh env)\"")
	}
	return config{brokers: strings.Split(brokers, ","), contenders: contenders, sizes: []int{200}, batches: []int{100},
		events: 300, rounds: 1, compressions: []string{"snappy"}, headerSets: []string{"all"}, partitions: 6}
}

// TestEveryContender runs every contender for a few hundred events in a
// child process against the real broker: each run's topic is read back and
// must hold exactly the events written, and the table has a row for each.
func TestEveryContender(t *testing.T) {
	cfg := testConfig(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(context.Background(), cfg, childRunner(exe), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	runs := res[shape{"snappy", "all", 200, 100}]
	tab := table(cfg, res)
	for _, c := range contenders {
		rs := runs[c.name]
		if len(rs) != 1 || rs[0].Events != 300 || rs[0].Seconds <= 0 || rs[0].Bytes < 300*200 || rs[0].RSS == 0 || rs[0].LogBytes <= 0 {
			t.Errorf("%s: runs %+v, want one run of 300 events of at least 200 bytes, timed, with its peak RSS and the size of its topic", c.name, rs)
		}
		if !strings.Contains(tab, "| "+c.name+" |") {
			t.Errorf("the table has no row for %s:\n%s", c.name, tab)
		}
	}
}

// TestShortDeliveryFails shows the read-back is what counts: a contender
// that reports success but wrote one batch fewer fails the run.
func TestShortDeliveryFails(t *testing.T) {
	cfg := testConfig(t)
	cfg.contenders = contenders[:1]
	short := func(ctx context.Context, s spec) (result, error) {
		s.Events -= s.Batch
		r, err := measure(ctx, s)
		r.Events += s.Batch
		return r, err
	}
	_, err := run(context.Background(), cfg, short, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "holds 200 records for read_committed consumers; 300 were written") {
		t.Fatalf("run = %v, want the short topic refused", err)
	}
}
