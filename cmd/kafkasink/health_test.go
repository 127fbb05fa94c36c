package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// TestReadiness checks each reason /readyz gives, on a sink of the fake
// cluster: no sink yet (a standby waiting for the lease, ready while
// PostgreSQL answers and not ready, naming PostgreSQL and not the lease,
// when it does not; or starting), PostgreSQL not streaming (with the
// last error),
// lag above either bound, and the sink fenced by a newer instance with
// its id; and that a lag in bytes with nothing pending in time, or an old
// commit with nothing pending, is ready.
func TestReadiness(t *testing.T) {
	brokers := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(1), kafkasinktest.Partitions(10)).Brokers()
	ctx := context.Background()
	cfg := kafkasink.Config{Brokers: brokers, SinkID: kafkasinktest.UniqueName(t)}
	sink, err := kafkasink.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(ctx)
	var pgDown atomic.Pointer[error]
	s := newHTTPServer(new(pgcdc.Monitor), "slot", 0, lagBounds{bytes: 1000, age: time.Minute}, func(context.Context) error {
		if err := pgDown.Load(); err != nil {
			return *err
		}
		return nil
	})
	now := time.Now()
	streaming := pgcdc.RunStats{State: pgcdc.RunStreaming, LagBytes: 10, LastCommit: now.Add(-time.Second)}
	notReady := func(st pgcdc.RunStats) string {
		if ready, reason := s.readiness(ctx, st, now); !ready {
			return reason
		}
		return ""
	}
	if got := notReady(streaming); !strings.Contains(got, "starting: the Kafka sink is not started yet") {
		t.Errorf("before the sink: %q", got)
	}
	refused := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	pgDown.Store(&refused)
	if got := notReady(streaming); got != "PostgreSQL: "+refused.Error() {
		t.Errorf("starting while PostgreSQL is down: not ready because %q, want PostgreSQL's error", got)
	}
	pgDown.Store(nil)
	s.standby.Store(true)
	if ready, reason := s.readiness(ctx, streaming, now); !ready || reason != "ok: standby, waiting for the slot's lease (the log names its holder)" {
		t.Errorf("a standby while PostgreSQL answers: ready %t, %q; want ready", ready, reason)
	}
	pgDown.Store(&refused)
	if got := notReady(streaming); got != "PostgreSQL: "+refused.Error() {
		t.Errorf("a standby while PostgreSQL is down: not ready because %q, want PostgreSQL's error and no word of the lease", got)
	}
	s.standby.Store(false)
	s.setSink(sink)
	for _, tc := range []struct {
		name string
		st   pgcdc.RunStats
		want string
	}{
		{"streaming", streaming, ""},
		{"connecting", pgcdc.RunStats{State: pgcdc.RunConnecting}, "PostgreSQL: connecting"},
		{"waiting", pgcdc.RunStats{State: pgcdc.RunWaiting, LastError: "pgcdc: connection refused"}, "PostgreSQL: waiting to reconnect (last error: pgcdc: connection refused)"},
		{"lag bytes", pgcdc.RunStats{State: pgcdc.RunStreaming, LagBytes: 1001, LastCommit: now}, "lag 1001 bytes of WAL, above -ready-max-lag-bytes 1000"},
		{"lag time", pgcdc.RunStats{State: pgcdc.RunStreaming, LagBytes: 1, LastCommit: now.Add(-2 * time.Minute)}, "lag 2m0s, above -ready-max-lag 1m0s"},
		{"idle since long", pgcdc.RunStats{State: pgcdc.RunStreaming, LagBytes: 0, LastCommit: now.Add(-time.Hour)}, ""},
	} {
		got := notReady(tc.st)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: not ready because %q, want %q", tc.name, got, tc.want)
		}
	}
	unbounded := newHTTPServer(new(pgcdc.Monitor), "slot", 0, lagBounds{}, nil)
	unbounded.setSink(sink)
	if ready, got := unbounded.readiness(ctx, pgcdc.RunStats{State: pgcdc.RunStreaming, LagBytes: 1 << 40, LastCommit: now.Add(-time.Hour)}, now); !ready {
		t.Errorf("no bounds: not ready because %q", got)
	}

	newer, err := kafkasink.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close(ctx)
	// The broker fenced the first sink at once; it learns so from its
	// next transaction.
	if err := sink.Write(ctx, kafkasink.Batch{Events: kafkasinktest.Inserts("public", "t", 100, 1, 1)}); err == nil {
		t.Fatal("a fenced sink wrote")
	}
	if got := notReady(streaming); !strings.Contains(got, "Kafka: kafkasink: fenced") {
		t.Errorf("fenced: not ready because %q, want the sink's ErrFenced", got)
	}
}

// TestHealthzStuckWriter: /healthz answers 503 while a Kafka transaction
// has been open longer than the transaction timeout (the fake broker holds
// the Write's first produce request), and 200 again once the Write ends.
func TestHealthzStuckWriter(t *testing.T) {
	cluster := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(1), kafkasinktest.Partitions(10))
	c, brokers := cluster.Kfake(), cluster.Brokers()
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: kafkasinktest.UniqueName(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(ctx)
	s := newHTTPServer(new(pgcdc.Monitor), "slot", 50*time.Millisecond, lagBounds{}, nil)
	s.setSink(sink)
	healthz := func() (int, string) {
		rec := httptest.NewRecorder()
		s.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := healthz(); code != 200 {
		t.Fatalf("idle: %d %q, want 200", code, body)
	}

	release, arrived := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() {
			close(arrived)
			c.SleepControl(func() { <-release })
		})
		c.DropControl()
		return nil, nil, false
	})
	written := make(chan error, 1)
	go func() {
		written <- sink.Write(ctx, kafkasink.Batch{Events: kafkasinktest.Inserts("public", "t", 100, 1, 3)})
	}()
	<-arrived
	time.Sleep(100 * time.Millisecond)
	code, body := healthz()
	close(release)
	if code != 503 || !strings.Contains(body, "longer than the transaction timeout 50ms: the writer is stuck") {
		t.Errorf("a Write held at the broker past the transaction timeout: %d %q, want 503 saying the writer is stuck", code, body)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if code, body := healthz(); code != 200 {
		t.Errorf("after the Write: %d %q, want 200", code, body)
	}
}

// TestHTTPAddr: the listener is on a loopback address unless
// -http-allow-remote, the readiness bounds need it, and a listener that
// cannot start is a configuration error (status 2).
func TestHTTPAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for accepted
	}{
		{nil, ""},
		{[]string{"-http-addr", "127.0.0.1:9187"}, ""},
		{[]string{"-http-addr", "localhost:9187"}, ""},
		{[]string{"-http-addr", "[::1]:9187"}, ""},
		{[]string{"-http-addr", ":9187"}, `-http-addr ":9187" is not a loopback address`},
		{[]string{"-http-addr", "0.0.0.0:9187"}, "set -http-allow-remote"},
		{[]string{"-http-addr", "10.1.2.3:9187"}, "not a loopback address"},
		{[]string{"-http-addr", "metrics.example.com:9187"}, "not a loopback address"},
		{[]string{"-http-addr", ":9187", "-http-allow-remote"}, ""},
		{[]string{"-http-addr", "9187"}, `-http-addr "9187": want host:port`},
		{[]string{"-ready-max-lag", "1m"}, "set -http-addr"},
		{[]string{"-http-allow-remote"}, "set -http-addr"},
		{[]string{"-http-addr", "127.0.0.1:9187", "-ready-max-lag-bytes", "-1"}, "want 0 (no bound) or more"},
	} {
		o, err := parse(append([]string{"-pg", "postgres://h/db", "-brokers", "b:9092"}, tc.args...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = o.configs(nil)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stderr bytes.Buffer
	args := []string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-http-addr", busy.Addr().String()}
	if code := run(context.Background(), args, noEnv, &stderr); code != 2 || !strings.Contains(stderr.String(), "-http-addr: listen tcp") {
		t.Errorf("-http-addr in use: status %d, output %q; want 2 and the listener's error", code, stderr.String())
	}
}
