package kafkasink_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// External readers: consumers this project did not write, both with
// isolation.level=read_committed, so the exactly-once claim does not rest on
// our own reader. They need the real broker of scripts/testenv.sh; against
// the in-process fake cluster the tests use sinktest.ReadCommitted only.

var idHeader = regexp.MustCompile(`kafkasink\.id[:=]([0-9A-F]+/[0-9A-F]+:[0-9]+)`)

// checkWithExternalReaders reads topic with kcat and with Kafka's Java
// console consumer and checks each sees every event of want exactly once.
func checkWithExternalReaders(t *testing.T, brokers []string, topic string, want []kafkasink.Event) {
	t.Helper()
	if os.Getenv("KAFKASINK_TEST_BROKERS") == "" {
		t.Log("external readers (kcat, Java console consumer) run against the real broker only: set up scripts/testenv.sh")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// scripts/testenv.sh provides a kcat on a current librdkafka (Debian's
	// cannot log in with SCRAM to Kafka 4); plain kcat works here too.
	kcatBin := os.Getenv("KAFKASINK_TEST_KCAT")
	if kcatBin == "" {
		kcatBin = "kcat"
	}
	kcat, err := exec.CommandContext(ctx, kcatBin, "-C", "-b", strings.Join(brokers, ","), "-t", topic,
		"-o", "beginning", "-e", "-q", "-X", "isolation.level=read_committed", "-f", "%h\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v (install kcat; scripts/testenv.sh does)", err)
	}
	checkIDs(t, "kcat", string(kcat), want)

	cp := os.Getenv("KAFKASINK_TEST_KAFKA_CLASSPATH")
	if cp == "" {
		t.Fatal("KAFKASINK_TEST_KAFKA_CLASSPATH is not set: eval \"$(scripts/testenv.sh env)\" sets it")
	}
	java, err := exec.CommandContext(ctx, "java", "-Dlog4j2.configurationFile="+os.Getenv("KAFKASINK_TEST_KAFKA_TOOLS_LOG4J"),
		"-cp", cp, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(brokers, ","), "--topic", topic, "--from-beginning",
		"--isolation-level", "read_committed", "--property", "print.headers=true", "--property", "print.value=false",
		"--timeout-ms", "15000").Output()
	if err != nil && len(java) == 0 {
		t.Fatalf("Java console consumer: %v", err)
	}
	checkIDs(t, "Java console consumer", string(java), want)
}

// checkIDs checks that out names each event id of want exactly once and
// nothing else.
func checkIDs(t *testing.T, reader, out string, want []kafkasink.Event) {
	t.Helper()
	seen := make(map[string]int)
	for _, m := range idHeader.FindAllStringSubmatch(out, -1) {
		seen[m[1]]++
	}
	bad := 0
	for i := range want {
		id := want[i].ID()
		if seen[id] != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("%s: event %s seen %d times", reader, id, seen[id])
			}
		}
		delete(seen, id)
	}
	for id, n := range seen {
		bad++
		t.Errorf("%s: unexpected event %s (%d times)", reader, id, n)
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d events not seen exactly once", reader, bad, len(want))
	}
	t.Logf("%s saw each of %d events exactly once", reader, len(want))
}
