package main

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestStandbyAndPostgreSQLDownEndpoints runs, against the real
// PostgreSQL and Kafka, a leader and a standby of one configuration, and
// a replica whose PostgreSQL is down (a closed port), each with its HTTP
// listener: the standby's /readyz is 200 (a RollingUpdate gated on
// readiness must not stall on it), its /status says "standby" and not
// the leader, and kafkasink_leader is 0 there and 1 on the leader; the
// replica without PostgreSQL is not ready, and says PostgreSQL, not the
// lease, in /readyz and /status.
func TestStandbyAndPostgreSQLDownEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_standby")
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name,
		"-topic-prefix", name, "-batch-max-wait", "20ms", "-progress", "0", "-log-format", "text", "-http-addr", "127.0.0.1:0"}
	status := func(base string) statusDoc {
		t.Helper()
		code, body := httpGet(t, base+"/status")
		var doc statusDoc
		if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
			t.Fatalf("/status: %d, %v:\n%s", code, err, body)
		}
		return doc
	}
	leaderMetric := func(base string) string {
		t.Helper()
		_, body := httpGet(t, base+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "kafkasink_leader{") {
				return line[strings.LastIndex(line, " ")+1:]
			}
		}
		t.Fatalf("/metrics has no kafkasink_leader:\n%s", body)
		return ""
	}

	leaderOut, leaderStatus, _ := startProgram(ctx, t, db, name, brokers, args)
	leader := listenerURL(t, leaderOut, leaderStatus)
	waitFor(t, 60*time.Second, "the leader ready", leaderStatus, leaderOut, func() bool { code, _ := httpGet(t, leader+"/readyz"); return code == 200 })

	var standbyOut kafkasinktest.LogBuffer
	standbyStatus := make(chan int, 1)
	sctx, stopStandby := context.WithCancel(ctx)
	defer stopStandby()
	go func() {
		standbyStatus <- run(sctx, args, func(k string) string { return env(k, brokers) }, &standbyOut)
	}()
	standby := listenerURL(t, &standbyOut, standbyStatus)
	waitFor(t, 30*time.Second, "the standby waiting for the lease", standbyStatus, &standbyOut, func() bool {
		return strings.Contains(standbyOut.String(), `msg="waiting for the lease`)
	})
	if code, body := httpGet(t, standby+"/readyz"); code != 200 || !strings.HasPrefix(body, "ok: standby") {
		t.Errorf("the standby's /readyz: %d %q, want 200 and ok: standby", code, body)
	}
	if doc := status(standby); !doc.Ready || doc.Leader || doc.State != "standby" || doc.Sink != nil {
		t.Errorf("the standby's /status: ready %t, leader %t, state %q, sink %v; want ready, not the leader, standby, no sink", doc.Ready, doc.Leader, doc.State, doc.Sink)
	}
	if doc := status(leader); !doc.Ready || !doc.Leader || doc.State != "streaming" {
		t.Errorf("the leader's /status: ready %t, leader %t, state %q; want ready, the leader, streaming", doc.Ready, doc.Leader, doc.State)
	}
	if s, l := leaderMetric(standby), leaderMetric(leader); s != "0" || l != "1" {
		t.Errorf("kafkasink_leader: standby %s, leader %s; want 0 and 1", s, l)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	down.Host = closed.Addr().String()
	closed.Close()
	var downOut kafkasinktest.LogBuffer
	downStatus := make(chan int, 1)
	dctx, stopDown := context.WithCancel(ctx)
	defer stopDown()
	downArgs := append(append([]string(nil), args...), "-pg", down.String())
	go func() { downStatus <- run(dctx, downArgs, func(k string) string { return env(k, brokers) }, &downOut) }()
	downURL := listenerURL(t, &downOut, downStatus)
	waitFor(t, 30*time.Second, "the replica without PostgreSQL waiting for the lease", downStatus, &downOut, func() bool {
		return strings.Contains(downOut.String(), "waiting for the lease failed")
	})
	code, body := httpGet(t, downURL+"/readyz")
	if code != 503 || !strings.HasPrefix(body, "PostgreSQL: ") || strings.Contains(body, "lease") {
		t.Errorf("/readyz with PostgreSQL down: %d %q, want 503 naming PostgreSQL and not the lease", code, body)
	}
	if doc := status(downURL); doc.Ready || doc.Leader || !strings.HasPrefix(doc.Reason, "PostgreSQL: ") {
		t.Errorf("/status with PostgreSQL down: ready %t, leader %t, reason %q; want not ready, not the leader, PostgreSQL named", doc.Ready, doc.Leader, doc.Reason)
	}
}
