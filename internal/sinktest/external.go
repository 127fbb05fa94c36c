package sinktest

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// The external readers are consumers this project did not write, so the
// exactly-once claim does not rest on our own reader. They need the real
// broker and tools of scripts/testenv.sh: KAFKASINK_TEST_KCAT (a kcat on a
// current librdkafka) and KAFKASINK_TEST_KAFKA_CLASSPATH.

var externalID = regexp.MustCompile(`kafkasink\.id[:=]([0-9A-F]+/[0-9A-F]+:[0-9]+)`)

// CheckExternalReaders reads topic with kcat and with Kafka's Java console
// consumer, both read_committed, and checks that each sees exactly the
// event ids of want, once each: the claim must not rest on our own reader.
func CheckExternalReaders(t *testing.T, brokers []string, topic string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kcatBin := optional(EnvKcat)
	if kcatBin == "" {
		kcatBin = "kcat"
	}
	start := time.Now()
	out, err := exec.CommandContext(ctx, kcatBin, "-C", "-b", strings.Join(brokers, ","), "-t", topic,
		"-o", "beginning", "-e", "-q", "-X", "isolation.level=read_committed", "-f", "%h\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v (scripts/testenv.sh provides it)", err)
	}
	sameIDs(t, fmt.Sprintf("kcat (%v)", time.Since(start).Round(time.Millisecond)), out, want)

	cp := optional(EnvKafkaCP)
	if cp == "" {
		t.Fatal("KAFKASINK_TEST_KAFKA_CLASSPATH is not set: eval \"$(scripts/testenv.sh env)\" sets it")
	}
	start = time.Now()
	out, err = exec.CommandContext(ctx, "java", "-Dlog4j2.configurationFile="+optional(EnvKafkaToolsLog),
		"-cp", cp, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(brokers, ","), "--topic", topic, "--from-beginning",
		"--isolation-level", "read_committed", "--property", "print.headers=true", "--property", "print.value=false",
		"--timeout-ms", "15000").Output()
	// The console consumer exits non-zero on its idle timeout.
	if err != nil && len(out) == 0 {
		t.Fatalf("Java console consumer: %v", err)
	}
	sameIDs(t, fmt.Sprintf("Java console consumer (%v)", time.Since(start).Round(time.Millisecond)), out, want)
}

func sameIDs(t *testing.T, reader string, out []byte, want []string) {
	t.Helper()
	seen := make(map[string]int, len(want))
	for _, m := range externalID.FindAllSubmatch(out, -1) {
		seen[string(m[1])]++
	}
	bad := 0
	for _, id := range want {
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
		if bad <= 10 {
			t.Errorf("%s: unexpected event %s (%d times)", reader, id, n)
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d events not seen exactly once", reader, bad, len(want))
	}
	t.Logf("%s saw each of %d events exactly once", reader, len(want))
}

// SyncBuffer is kafkasinktest.LogBuffer.
type SyncBuffer = kafkasinktest.LogBuffer
