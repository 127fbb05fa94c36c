package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkprom"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// httpProblems checks -http-addr and the flags that need it. The
// endpoints have no authentication, so the listener is on a loopback
// address unless -http-allow-remote says otherwise (in a container, whose
// published port reaches it from outside, it must).
func (o *options) httpProblems() []string {
	var problems []string
	if o.readyMaxLagBytes < 0 || o.readyMaxLag < 0 {
		problems = append(problems, "-ready-max-lag-bytes and -ready-max-lag: want 0 (no bound) or more")
	}
	if o.httpAddr == "" {
		if o.readyMaxLagBytes != 0 || o.readyMaxLag != 0 || o.httpAllowRemote {
			problems = append(problems, "-ready-max-lag-bytes, -ready-max-lag and -http-allow-remote are about the HTTP listener: set -http-addr, such as 127.0.0.1:9187")
		}
		return problems
	}
	host, _, err := net.SplitHostPort(o.httpAddr)
	if err != nil {
		return append(problems, fmt.Sprintf("-http-addr %q: want host:port, such as 127.0.0.1:9187", o.httpAddr))
	}
	if ip := net.ParseIP(host); !o.httpAllowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		problems = append(problems, fmt.Sprintf("-http-addr %q is not a loopback address, and its endpoints have no authentication: "+
			"listen on 127.0.0.1 (or localhost, ::1), or set -http-allow-remote where the network is trusted (a container's published port)", o.httpAddr))
	}
	return problems
}

// httpServer serves the program's state: /metrics (Prometheus), /livez
// and /healthz (the process is alive and its writer not stuck), /readyz (streaming,
// or a healthy standby; the sink healthy, lag under the bounds) and
// /status (JSON). It starts before the sink exists, so that a program
// waiting for its turn (or for Kafka) answers, and gets the sink by
// setSink.
type httpServer struct {
	mon     *pgcdc.Monitor
	sink    atomic.Pointer[kafkasink.Sink] // nil until setSink
	standby atomic.Bool                    // waiting for the slot's lease (-ha)
	leader  atomic.Bool                    // holds the slot's lease (-ha), or passed the wait without one (-ha=false)
	// pgPing tries PostgreSQL (a connection, closed at once): what a
	// standby's readiness rests on, since it streams nothing to show
	// that the database answers.
	pgPing     func(context.Context) error
	reg        *prometheus.Registry
	txnTimeout time.Duration // the sink's transaction timeout: a Write open longer is stuck
	maxLag     lagBounds
	backfills  *pgcdc.Backfills // Run's, for the backfill endpoints (backfill.go)
}

// lagBounds are -ready-max-lag-bytes and -ready-max-lag; zero is no bound.
type lagBounds struct {
	bytes int64
	age   time.Duration
}

func newHTTPServer(mon *pgcdc.Monitor, slot string, txnTimeout time.Duration, maxLag lagBounds, pgPing func(context.Context) error) *httpServer {
	if txnTimeout == 0 {
		txnTimeout = kafkasink.DefaultTransactionTimeout
	}
	s := &httpServer{mon: mon, reg: prometheus.NewRegistry(), txnTimeout: txnTimeout, maxLag: maxLag, pgPing: pgPing}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		kafkasinkprom.NewRunCollector(mon, slot),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "kafkasink_leader",
			Help:        "1 while this replica holds the slot's lease (with -ha=false: once it started), 0 while it is a standby or starting.",
			ConstLabels: prometheus.Labels{"slot": slot},
		}, func() float64 {
			if s.leader.Load() {
				return 1
			}
			return 0
		}))
	return s
}

// setSink makes sink's state part of what the server reports.
func (s *httpServer) setSink(sink *kafkasink.Sink) {
	s.reg.MustRegister(kafkasinkprom.NewCollector(sink))
	s.sink.Store(sink)
}

// serve listens on addr and serves until the returned function, which
// waits for the requests in progress (at most a few seconds), is called.
func (s *httpServer) serve(addr string, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf("-http-addr: %v", err)}}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	// /livez is the name Kubernetes uses for liveness; /healthz stays
	// for the users of the older name.
	mux.HandleFunc("GET /livez", s.healthz)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /status", s.status)
	s.registerBackfills(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("the HTTP listener stopped", "error", err)
		}
	}()
	logger.Info("HTTP listener started", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// healthz answers 200 while the process can make progress: no Kafka
// transaction has been open longer than the transaction timeout (after
// which the broker aborts it, so a Write still in it is stuck). Only the
// exactly-once mode has transactions: in the others /healthz says only
// that the process answers. Kafka or PostgreSQL being unreachable is
// /readyz's business, not a reason to restart the process.
func (s *httpServer) healthz(w http.ResponseWriter, _ *http.Request) {
	if sink := s.sink.Load(); sink != nil {
		if open := sink.Stats().OpenTransaction; open > s.txnTimeout {
			http.Error(w, fmt.Sprintf("a Kafka transaction has been open for %v, longer than the transaction timeout %v: the writer is stuck",
				open.Round(time.Second), s.txnTimeout), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 while the program delivers, or stands by healthy:
// pgcdc streams, the sink answers Ping (reachable, not fenced, not
// stopped), and the lag is within the bounds; or it is a standby waiting
// for the slot's lease and PostgreSQL answers (a RollingUpdate gated on
// readiness must not wait for a standby to lead). 503 and the reason
// otherwise, naming PostgreSQL whenever it is down. The body is one
// line: "ok", "ok: standby ...", or the reason.
func (s *httpServer) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if ready, reason := s.readiness(ctx, s.mon.Stats(), time.Now()); !ready {
		http.Error(w, reason, http.StatusServiceUnavailable)
	} else {
		fmt.Fprintln(w, reason)
	}
}

// readiness is whether the program is ready, and the one-line reason.
// The calls that leave the process (PostgreSQL for a standby, the sink's
// Ping) come last.
func (s *httpServer) readiness(ctx context.Context, st pgcdc.RunStats, now time.Time) (bool, string) {
	sink := s.sink.Load()
	if sink == nil && s.pgPing != nil {
		// Before the sink, nothing but PostgreSQL is known to be
		// wrong: a replica starting or waiting while it is down says so.
		if err := s.pgPing(ctx); err != nil {
			return false, "PostgreSQL: " + err.Error()
		}
	}
	switch {
	case sink == nil && s.standby.Load():
		return true, "ok: standby, waiting for the slot's lease (the log names its holder)"
	case sink == nil:
		return false, "starting: the Kafka sink is not started yet"
	case st.State != pgcdc.RunStreaming && st.LastError != "":
		return false, fmt.Sprintf("PostgreSQL: %s (last error: %s)", st.State, st.LastError)
	case st.State != pgcdc.RunStreaming:
		return false, "PostgreSQL: " + st.State.String()
	case s.maxLag.bytes > 0 && st.LagBytes > s.maxLag.bytes:
		return false, fmt.Sprintf("lag %d bytes of WAL, above -ready-max-lag-bytes %d", st.LagBytes, s.maxLag.bytes)
	}
	if age := lagAge(st, now); s.maxLag.age > 0 && age > s.maxLag.age {
		return false, fmt.Sprintf("lag %v, above -ready-max-lag %v", age.Round(time.Millisecond), s.maxLag.age)
	}
	if err := sink.Ping(ctx); err != nil {
		return false, "Kafka: " + err.Error()
	}
	return true, "ok" + failoverNote(st.StandbySync)
}

// failoverNote is what /readyz adds about the slot's copy on
// -failover-standby: whether a failover to it now is safe. It does not
// decide readiness, which is about delivering: a standby that lags does
// not stop the pipeline.
func failoverNote(s pgcdc.StandbySync) string {
	switch {
	case s.Checked.IsZero():
		return ""
	case s.Synced:
		return fmt.Sprintf("; failover slot synchronised to the standby (at %s)", s.Confirmed)
	default:
		return "; a failover to the standby now is not safe: " + s.Problem
	}
}

// statusDoc is /status (docs/program.md documents it): what /readyz
// says, whether this replica leads, and the Monitor's and the sink's
// Stats with states as words, durations as Go duration strings ("1.5s"),
// times in RFC 3339 (left out while zero) and LSNs as PostgreSQL writes
// them. Every field of /status is in this one type and the types it
// holds.
type statusDoc struct {
	Ready  bool   `json:"ready"`  // as /readyz: true for 200
	Reason string `json:"reason"` // /readyz's body
	Leader bool   `json:"leader"` // holds the slot's lease (-ha=false: started)
	// State is "standby" (waiting for the lease), "starting" (before
	// the sink), or pgcdc's Run state: "connecting", "snapshotting",
	// "streaming", "waiting to reconnect", "stopped".
	State      string        `json:"state"`
	Lag        string        `json:"lag"`        // how far behind the database Kafka is in time; see lagAge
	LagBytes   int64         `json:"lag_bytes"`  // WAL the slot holds that is not delivered
	Checkpoint string        `json:"checkpoint"` // the sink's checkpoint position; "" before the sink
	Run        runStatus     `json:"run"`
	Sink       *sinkStatus   `json:"sink"` // null before the sink
	Backfills  []backfillDoc `json:"backfills"`
}

// runStatus is pgcdc.RunStats in /status's terms.
type runStatus struct {
	State             string                 `json:"state"`
	Reconnects        int64                  `json:"reconnects"`
	LastError         string                 `json:"last_error,omitempty"`
	LastErrorTime     string                 `json:"last_error_time,omitempty"`
	ServerWALEnd      string                 `json:"server_wal_end"`
	Confirmed         string                 `json:"confirmed"`
	Events            int64                  `json:"events"`
	SnapshotRows      int64                  `json:"snapshot_rows"`
	LastCommit        string                 `json:"last_commit,omitempty"`
	SpoolBytes        int64                  `json:"spool_bytes"`
	LastBackfillError string                 `json:"last_backfill_error,omitempty"`
	LastBackfillTime  string                 `json:"last_backfill_error_time,omitempty"`
	SnapshotTables    map[string]tableStatus `json:"snapshot_tables,omitempty"`
	FailoverSlot      bool                   `json:"failover_slot"`
	StandbySync       *standbySyncStatus     `json:"standby_sync,omitempty"` // null without -failover-standby
}

// standbySyncStatus is pgcdc.StandbySync in /status's terms.
type standbySyncStatus struct {
	Checked   string `json:"checked"`
	Synced    bool   `json:"synced"`
	Confirmed string `json:"confirmed"`
	Problem   string `json:"problem,omitempty"`
}

type tableStatus struct {
	Rows          int64         `json:"rows"`
	Done          bool          `json:"done"`
	RowsPerSecond float64       `json:"rows_per_second"`
	RowsLeft      int64         `json:"rows_left"`
	SecondsLeft   float64       `json:"seconds_left"`
	Ranges        []rangeStatus `json:"ranges,omitempty"`
}

// rangeStatus is one key range of a table a parallel snapshot reads.
type rangeStatus struct {
	Rows int64 `json:"rows"`
	Done bool  `json:"done"`
}

// sinkStatus is kafkasink.Stats in /status's terms.
type sinkStatus struct {
	Writes             int64  `json:"writes"`
	Events             int64  `json:"events"`
	Written            int64  `json:"written"`
	Records            int64  `json:"records"`
	Bytes              int64  `json:"bytes"`
	Rejected           int64  `json:"rejected"`
	DeadLettered       int64  `json:"dead_lettered"`
	SkippedRedelivered int64  `json:"skipped_redelivered"`
	SkippedByEncoder   int64  `json:"skipped_by_encoder"`
	Committed          int64  `json:"committed"`
	Aborted            int64  `json:"aborted"`
	Retries            int64  `json:"retries"`
	TransactionTime    string `json:"transaction_time"` // the committed transactions' durations, summed
	CheckpointTime     string `json:"checkpoint_time,omitempty"`
	OpenTransaction    string `json:"open_transaction"` // "0s" when none may be open
}

// timeText is t in RFC 3339, or "" for the zero time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func newRunStatus(st pgcdc.RunStats) runStatus {
	r := runStatus{
		State: st.State.String(), Reconnects: st.Reconnects, LastError: st.LastError, LastErrorTime: timeText(st.LastErrorTime),
		ServerWALEnd: st.ServerWALEnd.String(), Confirmed: st.Confirmed.String(), Events: st.Events, SnapshotRows: st.SnapshotRows,
		LastCommit: timeText(st.LastCommit), SpoolBytes: st.SpoolBytes,
		LastBackfillError: st.LastBackfillError, LastBackfillTime: timeText(st.LastBackfillErrorTime),
		FailoverSlot: st.FailoverSlot,
	}
	if s := st.StandbySync; !s.Checked.IsZero() {
		r.StandbySync = &standbySyncStatus{Checked: timeText(s.Checked), Synced: s.Synced, Confirmed: s.Confirmed.String(), Problem: s.Problem}
	}
	for table, p := range st.SnapshotTables {
		if r.SnapshotTables == nil {
			r.SnapshotTables = make(map[string]tableStatus)
		}
		r.SnapshotTables[table] = tableStatus{Rows: p.Rows, Done: p.Done, RowsPerSecond: p.RowsPerSecond, RowsLeft: p.RowsLeft,
			SecondsLeft: p.TimeLeft.Seconds()}
		for _, rp := range p.Ranges {
			ts := r.SnapshotTables[table]
			ts.Ranges = append(ts.Ranges, rangeStatus{Rows: rp.Rows, Done: rp.Done})
			r.SnapshotTables[table] = ts
		}
	}
	return r
}

func newSinkStatus(st kafkasink.Stats) *sinkStatus {
	return &sinkStatus{
		Writes: st.Writes, Events: st.Events, Written: st.Written, Records: st.Records, Bytes: st.Bytes,
		Rejected: st.Rejected, DeadLettered: st.DeadLettered, SkippedRedelivered: st.SkippedRedelivered, SkippedByEncoder: st.SkippedByEncoder,
		Committed: st.Committed, Aborted: st.Aborted, Retries: st.Retries,
		TransactionTime: st.TransactionDurations.Sum.String(), CheckpointTime: timeText(st.Checkpoint.Time),
		OpenTransaction: st.OpenTransaction.String(),
	}
}

func (s *httpServer) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	now, st := time.Now(), s.mon.Stats()
	doc := statusDoc{Leader: s.leader.Load(), State: st.State.String(), Lag: lagAge(st, now).Round(time.Millisecond).String(),
		LagBytes: st.LagBytes, Run: newRunStatus(st), Backfills: backfillDocs(st.Backfills)}
	doc.Ready, doc.Reason = s.readiness(ctx, st, now)
	switch sink := s.sink.Load(); {
	case sink != nil:
		stats := sink.Stats()
		doc.Sink, doc.Checkpoint = newSinkStatus(stats), stats.Checkpoint.Position.String()
	case s.standby.Load():
		doc.State = "standby"
	default:
		doc.State = "starting"
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(doc)
}
