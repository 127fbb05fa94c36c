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

// httpServer serves the program's state: /metrics (Prometheus), /healthz
// (the process is alive and its writer not stuck), /readyz (streaming,
// the sink healthy, lag under the bounds) and /status (JSON). It starts
// before the sink exists, so that a program waiting for its turn (or for
// Kafka) answers /healthz, and gets the sink by setSink.
type httpServer struct {
	mon        *pgcdc.Monitor
	sink       atomic.Pointer[kafkasink.Sink] // nil until setSink
	standby    atomic.Bool                    // waiting for the slot's lease (-ha)
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

func newHTTPServer(mon *pgcdc.Monitor, slot string, txnTimeout time.Duration, maxLag lagBounds) *httpServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		kafkasinkprom.NewRunCollector(mon, slot))
	if txnTimeout == 0 {
		txnTimeout = kafkasink.DefaultTransactionTimeout
	}
	return &httpServer{mon: mon, reg: reg, txnTimeout: txnTimeout, maxLag: maxLag}
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

// readyz answers 200 while the program delivers: pgcdc streams, the sink
// answers Ping (reachable, not fenced, not stopped), and the lag is within
// the bounds; 503 with the reason otherwise.
func (s *httpServer) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if reason := s.notReady(ctx, s.mon.Stats(), time.Now()); reason != "" {
		http.Error(w, reason, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// notReady is why the program is not ready, or "" when it is. Ping, the
// only call that leaves the process, comes last.
func (s *httpServer) notReady(ctx context.Context, st pgcdc.RunStats, now time.Time) string {
	sink := s.sink.Load()
	switch {
	case sink == nil && s.standby.Load():
		return "standby: waiting for the slot's lease (the log names its holder)"
	case sink == nil:
		return "the Kafka sink is not started yet"
	case st.State != pgcdc.RunStreaming && st.LastError != "":
		return fmt.Sprintf("PostgreSQL: %s (last error: %s)", st.State, st.LastError)
	case st.State != pgcdc.RunStreaming:
		return "PostgreSQL: " + st.State.String()
	case s.maxLag.bytes > 0 && st.LagBytes > s.maxLag.bytes:
		return fmt.Sprintf("lag %d bytes of WAL, above -ready-max-lag-bytes %d", st.LagBytes, s.maxLag.bytes)
	}
	if age := lagAge(st, now); s.maxLag.age > 0 && age > s.maxLag.age {
		return fmt.Sprintf("lag %v, above -ready-max-lag %v", age.Round(time.Millisecond), s.maxLag.age)
	}
	if err := sink.Ping(ctx); err != nil {
		return "Kafka: " + err.Error()
	}
	return ""
}

// statusDoc is /status: the Monitor's and the sink's Stats as they are
// (durations in nanoseconds, LSNs as numbers), and the readings that need
// a name or a unit.
type statusDoc struct {
	Ready      string           `json:"ready"`       // "ok", or why not, as /readyz says
	State      string           `json:"state"`       // Run.State's name
	LagSeconds float64          `json:"lag_seconds"` // see lagAge
	Checkpoint string           `json:"checkpoint"`  // the sink's checkpoint position; "" before the sink
	Run        pgcdc.RunStats   `json:"run"`
	Sink       *kafkasink.Stats `json:"sink"` // null before the sink is created
	Backfills  []backfillDoc    `json:"backfills"`
}

func (s *httpServer) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	now, st := time.Now(), s.mon.Stats()
	doc := statusDoc{Ready: "ok", State: st.State.String(), LagSeconds: lagAge(st, now).Seconds(), Run: st, Backfills: backfillDocs(st.Backfills)}
	if reason := s.notReady(ctx, st, now); reason != "" {
		doc.Ready = reason
	}
	if sink := s.sink.Load(); sink != nil {
		stats := sink.Stats()
		doc.Sink, doc.Checkpoint = &stats, stats.Checkpoint.Position.String()
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(doc)
}
