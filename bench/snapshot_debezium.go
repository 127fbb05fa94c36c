package main

// -snapshot-debezium: Debezium 3.6.1's initial snapshot of the -snapshot
// table in the same round, as scripts/bench-debezium.sh runs Debezium:
// the PostgreSQL connector as an Embedded Engine through
// internal/debeziumref's Produce, which writes every record to Kafka
// through JsonConverter and a producer with Kafka Connect's source-task
// settings (acks=all), until every row is acknowledged.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// debeziumHarness is the Produce program, built once an invocation.
type debeziumHarness struct {
	classpath string
}

// harnessDir is internal/debeziumref beside this source file.
func harnessDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "internal", "debeziumref")
}

// buildDebezium builds the harness with Maven, as
// scripts/bench-debezium.sh does. The error says what is missing when
// Java or Maven is.
func buildDebezium(ctx context.Context) (*debeziumHarness, error) {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("-snapshot-debezium needs Java 17 or later and Maven to build internal/debeziumref: %s is not on the PATH", tool)
		}
	}
	dir := harnessDir()
	if _, err := os.Stat(filepath.Join(dir, "pom.xml")); err != nil {
		return nil, fmt.Errorf("-snapshot-debezium: no Debezium harness at %s: %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "compile", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("-snapshot-debezium: building the Debezium harness in %s with Maven: %w\n%s", dir, err, tail(out, 2000))
	}
	cp, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		return nil, err
	}
	return &debeziumHarness{classpath: filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))}, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// procResult is a whole process's wall time, CPU time and peak RSS;
// for Debezium also Snapshot, the seconds from the engine's start to the
// last row acknowledged.
type procResult struct {
	Seconds    float64
	CPUSeconds float64
	RSS        int64
	Snapshot   float64
}

// runProcess runs cmd and measures it as a whole.
func runProcess(cmd *exec.Cmd) (procResult, error) {
	start := time.Now()
	err := cmd.Run()
	r := procResult{Seconds: time.Since(start).Seconds()}
	if ps := cmd.ProcessState; ps != nil {
		r.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.RSS = int64(ru.Maxrss) << 10 // kB on Linux
		}
	}
	return r, err
}

// debeziumSnapshot runs Debezium's initial snapshot of the table on a
// slot of its own (created by Debezium, dropped after) into a topic of
// its own with the partitions of pgcdc's, and checks that the topic then
// holds every row once.
func (e *pgEnv) debeziumSnapshot(ctx context.Context, h *debeziumHarness, rows int64) (procResult, error) {
	pc, err := pgx.ParseConfig(e.cfg.conn)
	if err != nil {
		return procResult{}, err
	}
	e.n++
	slot := fmt.Sprintf("%s_%d", e.name, e.n)
	prefix := fmt.Sprintf("%sdbz%d", e.topics, e.n)
	topic := prefix + ".public." + e.name
	if err := createTopic(ctx, e.admin, topic, e.cfg.partitions, e.rf, nil); err != nil {
		return procResult{}, err
	}
	props := map[string]string{
		"name":                        prefix,
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"offset.storage":              "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
		"offset.flush.interval.ms":    "60000",
		"database.hostname":           pc.Host,
		"database.port":               fmt.Sprint(pc.Port),
		"database.user":               pc.User,
		"database.password":           pc.Password,
		"database.dbname":             pc.Database,
		"topic.prefix":                prefix,
		"plugin.name":                 "pgoutput",
		"slot.name":                   slot,
		"slot.drop.on.stop":           "false",
		"publication.name":            e.name,
		"publication.autocreate.mode": "disabled",
		"table.include.list":          "public." + e.name,
		"snapshot.mode":               "initial",
		"harness.bootstrap.servers":   strings.Join(e.cfg.brokers, ","),
		"harness.schemas.enable":      "false",
		"harness.expect":              fmt.Sprint(rows),
		"harness.timeout.s":           "3600",
	}
	dir, err := os.MkdirTemp("", "bench-debezium-")
	if err != nil {
		return procResult{}, err
	}
	defer os.RemoveAll(dir)
	var b strings.Builder
	for k, v := range props {
		// Properties files escape backslashes; none of these has
		// another character that needs it.
		fmt.Fprintf(&b, "%s=%s\n", k, strings.ReplaceAll(v, `\`, `\\`))
	}
	file := filepath.Join(dir, "run.properties")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return procResult{}, err
	}
	var log strings.Builder
	cmd := exec.CommandContext(ctx, "java", "-Duser.timezone=UTC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", h.classpath, "io.kafkasink.debeziumref.Produce", file)
	cmd.Stdout, cmd.Stderr = &log, &log
	res, err := runProcess(cmd)
	e.dropSlots(context.Background(), slotNamed, slot)
	if err != nil {
		return res, fmt.Errorf("Debezium: %w\n%s", err, tail([]byte(log.String()), 4000))
	}
	n, err := countCommitted(ctx, e.admin, e.cfg.brokers, topic)
	if err != nil {
		return res, err
	}
	if n != rows {
		return res, fmt.Errorf("Debezium: the topic %s holds %d records read_committed, want %d", topic, n, rows)
	}
	// Produce's own clock runs from before the engine's start to the
	// last acknowledgement: the JVM's start before it and the engine's
	// shutdown after it (seconds) are left out.
	var acked int64
	for _, line := range strings.Split(log.String(), "\n") {
		if _, err := fmt.Sscanf(line, "produce: %d records acknowledged in %f s", &acked, &res.Snapshot); err == nil {
			break
		}
	}
	if acked != rows || res.Snapshot <= 0 {
		return res, errors.New("Debezium: its harness did not report every row acknowledged:\n" + string(tail([]byte(log.String()), 4000)))
	}
	return res, nil
}
