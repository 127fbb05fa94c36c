package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestHTTPEndpoints runs the program against the real PostgreSQL and
// Kafka, configured by a file (the PostgreSQL password in a file of its
// own), with its HTTP listener: /healthz answers while it starts, /readyz
// goes from 503 (an open transaction holds back the slot's creation) to
// 200 when it streams, /metrics moves with the rows inserted, /status
// decodes and agrees with the topic, and the listener ends with the
// program.
func TestHTTPEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_http")
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		t.Skip("KAFKASINK_TEST_PG has no password to move into -pg-password-file")
	}
	u.User = url.User(u.User.Username())
	config := writeFile(t, "kafkasink.yaml", fmt.Sprintf(`
pg: %q
pg_password_file: %q
brokers: [%q]
tables: [public.%s]
slot: %s
publication: %s
topic_prefix: %s
batch_max_wait: 20ms
progress: 0
log_format: text
http_addr: 127.0.0.1:0
ready_max_lag_bytes: 1073741824
`, u.String(), writeFile(t, "pg-password", password+"\n"), brokers, name, name, name, name))

	// CREATE_REPLICATION_SLOT waits for the transactions that hold an
	// xid to end: this one keeps the program from streaming until the
	// test has seen /readyz refuse.
	blocker, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(context.Background())
	if _, err := blocker.Exec(ctx, "INSERT INTO "+name+" VALUES (0, 'held')"); err != nil {
		t.Fatal(err)
	}

	var out kafkasinktest.LogBuffer
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	status := make(chan int, 1)
	go func() { status <- run(runCtx, []string{"-config", config}, noEnv, &out) }()

	base := listenerURL(t, &out, status)
	get := func(path string) (int, string) { t.Helper(); return httpGet(t, base+path) }

	for _, path := range []string{"/livez", "/healthz"} {
		if code, body := get(path); code != 200 {
			t.Errorf("%s while starting: %d %q, want 200", path, code, body)
		}
	}
	// Before it streams the program goes through preflight checks (503
	// "starting"), takes the slot's lease (a standby, which /readyz
	// counts ready) and starts the sink; then the slot's creation waits
	// for the blocker, which /readyz names as PostgreSQL's state.
	code, reason := get("/readyz")
	starting := func() bool {
		return code == 503 && !strings.HasPrefix(reason, "PostgreSQL: ") || code == 200 && strings.HasPrefix(reason, "ok: standby")
	}
	for deadline := time.Now().Add(30 * time.Second); starting() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		code, reason = get("/readyz")
	}
	if code != 503 || !strings.HasPrefix(reason, "PostgreSQL: ") || strings.Count(strings.TrimSpace(reason), "\n") != 0 {
		t.Errorf("/readyz before streaming: %d %q, want 503 and a one-line reason naming PostgreSQL", code, reason)
	}
	t.Logf("/readyz before streaming: %d %s", code, strings.TrimSpace(reason))
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "/readyz 200 ok", status, &out, func() bool {
		code, body := get("/readyz")
		return code == 200 && strings.HasPrefix(body, "ok") && !strings.HasPrefix(body, "ok: standby")
	})

	metrics := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		values := make(map[string]float64)
		for name, f := range families {
			for _, m := range f.GetMetric() {
				key := name
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" || l.GetName() == "state" {
						key += "{" + l.GetValue() + "}"
					}
				}
				values[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return values
	}
	before := metrics()
	for _, series := range []string{"go_goroutines", "process_resident_memory_bytes", "kafkasink_pgcdc_lag_bytes", "kafkasink_open_transaction_seconds"} {
		if _, ok := before[series]; !ok {
			t.Errorf("/metrics has no %s", series)
		}
	}
	if before["kafkasink_pgcdc_state{streaming}"] != 1 {
		t.Errorf("kafkasink_pgcdc_state{state=streaming} = %v while /readyz says ready, want 1", before["kafkasink_pgcdc_state{streaming}"])
	}

	const rows = 10
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, 'row ' || g FROM generate_series(1, $1) g", rows); err != nil {
		t.Fatal(err)
	}
	var after map[string]float64
	waitFor(t, 60*time.Second, fmt.Sprintf("the metrics to count %d more events", rows), status, &out, func() bool {
		after = metrics()
		return after["kafkasink_pgcdc_events_total"]-before["kafkasink_pgcdc_events_total"] >= rows
	})
	for _, series := range []string{"kafkasink_pgcdc_events_total", "kafkasink_events_written_total", "kafkasink_records_total"} {
		if d := after[series] - before[series]; d != rows {
			t.Errorf("%s moved by %v after %d rows inserted, want %d", series, d, rows, rows)
		}
	}
	if after["kafkasink_transactions_total{committed}"] <= before["kafkasink_transactions_total{committed}"] || after["kafkasink_bytes_total"] <= before["kafkasink_bytes_total"] {
		t.Errorf("kafkasink_transactions_total{committed} %v -> %v, kafkasink_bytes_total %v -> %v: want both to grow",
			before["kafkasink_transactions_total{committed}"], after["kafkasink_transactions_total{committed}"], before["kafkasink_bytes_total"], after["kafkasink_bytes_total"])
	}

	code, body := get("/status")
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
		t.Fatalf("/status: %d, %v:\n%s", code, err, body)
	}
	records := kafkasinktest.ReadCommittedRaw(t, []string{brokers}, name+".public."+name)
	if !doc.Ready || doc.Reason != "ok" || !doc.Leader || doc.State != "streaming" || doc.Sink == nil || doc.Run.Events != rows || doc.Sink.Written != int64(len(records)) ||
		len(records) != rows || doc.Checkpoint == "" {
		t.Errorf("/status says ready %t (%q), leader %t, state %q, %d events, %v written, checkpoint %q; the topic has %d records, want %d:\n%s",
			doc.Ready, doc.Reason, doc.Leader, doc.State, doc.Run.Events, doc.Sink, doc.Checkpoint, len(records), rows, body)
	}
	// Durations are strings Go parses, times RFC 3339, LSNs PostgreSQL's.
	for what, d := range map[string]string{"lag": doc.Lag, "sink.open_transaction": doc.Sink.OpenTransaction, "sink.transaction_time": doc.Sink.TransactionTime} {
		if _, err := time.ParseDuration(d); err != nil {
			t.Errorf("/status %s %q is not a duration: %v", what, d, err)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, doc.Run.LastCommit); err != nil {
		t.Errorf("/status run.last_commit %q: %v", doc.Run.LastCommit, err)
	}
	if _, err := kafkasink.ParseLSN(doc.Run.Confirmed); err != nil || doc.Run.Confirmed == "0/0" {
		t.Errorf("/status run.confirmed %q: %v", doc.Run.Confirmed, err)
	}
	if after["kafkasink_leader"] != 1 {
		t.Errorf("kafkasink_leader = %v while leading, want 1", after["kafkasink_leader"])
	}

	stop()
	select {
	case code := <-status:
		if code != 0 {
			t.Fatalf("exit status %d after cancellation, want 0:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("did not stop within 30s of cancellation:\n%s", out.String())
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the HTTP listener still answers after the program ended")
	}
}

// listenerURL waits for the program whose log is out to start its HTTP
// listener, and returns its base URL.
func listenerURL(t *testing.T, out *kafkasinktest.LogBuffer, status chan int) string {
	t.Helper()
	listening := regexp.MustCompile(`msg="HTTP listener started" addr=(\S+)`)
	waitFor(t, 30*time.Second, "the HTTP listener", status, out, func() bool { return listening.MatchString(out.String()) })
	return "http://" + listening.FindStringSubmatch(out.String())[1]
}

// httpGet returns the status code and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
