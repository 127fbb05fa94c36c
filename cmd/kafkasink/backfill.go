package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// This file is the program's way to ask a running instance for backfills
// (docs/backfill.md): endpoints on its HTTP listener (-http-addr), and the
// backfill command, which calls them.
//
//	GET  /backfills                  the unfinished backfills and their progress
//	POST /backfills                  {"table": "public.orders", "where": "region = 'eu'"}
//	POST /backfills/{id}/pause       and resume, cancel
//
// The listener has no authentication and is on a loopback address unless
// -http-allow-remote (see httpProblems). A POST must say it sends JSON:
// a web page the operator's browser opens cannot send that to another
// origin without asking first (CORS), which this server never allows, so
// no page can start or cancel a backfill behind the operator's back.

// backfillCallTimeout bounds how long an endpoint waits for Run to take
// the call: Run takes calls while it streams, between two transactions,
// and not while it connects, snapshots or waits to reconnect.
const backfillCallTimeout = 30 * time.Second

// backfillDoc is one backfill as the endpoints and the status document
// show it.
type backfillDoc struct {
	ID     string `json:"id"`
	Table  string `json:"table"`
	Where  string `json:"where,omitempty"`
	Paused bool   `json:"paused"`
	// Rows and Chunks are done across restarts; LastKey is the key of
	// the last row read (the current position), null before the first
	// chunk.
	Rows    int64    `json:"rows"`
	Chunks  int64    `json:"chunks"`
	LastKey []string `json:"last_key"`
	// RowsLeft estimates the rows still to read, -1 when unknown;
	// RowsPerSecond is the rate since this run began or took it.
	RowsLeft      int64     `json:"rows_left"`
	RowsPerSecond float64   `json:"rows_per_second"`
	Requested     time.Time `json:"requested"`
	By            string    `json:"by"` // api (this endpoint too), signal or added
}

func backfillDocOf(p pgcdc.BackfillProgress) backfillDoc {
	return backfillDoc{ID: p.ID, Table: p.Table, Where: p.Where, Paused: p.Paused, Rows: p.Rows, Chunks: p.Chunks, LastKey: p.LastKey,
		RowsLeft: p.RowsLeft, RowsPerSecond: p.RowsPerSecond, Requested: p.Requested, By: p.By}
}

// backfillDocs is the status document's backfills field: never null.
func backfillDocs(ps []pgcdc.BackfillProgress) []backfillDoc {
	out := make([]backfillDoc, len(ps))
	for i, p := range ps {
		out[i] = backfillDocOf(p)
	}
	return out
}

// backfillRequestDoc is the body of POST /backfills.
type backfillRequestDoc struct {
	Table string `json:"table"`
	Where string `json:"where,omitempty"`
}

// registerBackfills adds the backfill endpoints to mux.
func (s *httpServer) registerBackfills(mux *http.ServeMux) {
	mux.HandleFunc("GET /backfills", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, backfillDocs(s.mon.Stats().Backfills))
	})
	mux.HandleFunc("POST /backfills", s.requestBackfill)
	for action, call := range map[string]func(*pgcdc.Backfills, context.Context, string) error{
		"pause": (*pgcdc.Backfills).Pause, "resume": (*pgcdc.Backfills).Resume, "cancel": (*pgcdc.Backfills).Cancel,
	} {
		mux.HandleFunc("POST /backfills/{id}/"+action, func(w http.ResponseWriter, r *http.Request) {
			if !jsonRequest(w, r) {
				return
			}
			id := r.PathValue("id")
			ctx, cancel := context.WithTimeout(r.Context(), backfillCallTimeout)
			defer cancel()
			if err := call(s.backfills, ctx, id); err != nil {
				backfillFailed(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"id": id, "done": action})
		})
	}
}

// requestBackfill is POST /backfills.
func (s *httpServer) requestBackfill(w http.ResponseWriter, r *http.Request) {
	if !jsonRequest(w, r) {
		return
	}
	var req backfillRequestDoc
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `the body is not a backfill request: want {"table": "schema.table", "where": "an optional condition"}: `+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Table == "" {
		http.Error(w, `the request names no table: want {"table": "schema.table", "where": "an optional condition"}`, http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), backfillCallTimeout)
	defer cancel()
	st, err := s.backfills.Request(ctx, pgcdc.BackfillRequest{Table: req.Table, Where: req.Where})
	if err != nil {
		backfillFailed(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, backfillDocOf(pgcdc.BackfillProgress{BackfillStatus: st, RowsLeft: -1}))
}

// jsonRequest refuses a request that does not say it sends JSON (see the
// top of the file for why), and reports whether it may go on.
func jsonRequest(w http.ResponseWriter, r *http.Request) bool {
	if t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || t != "application/json" {
		http.Error(w, "send Content-Type: application/json (the backfill command does)", http.StatusUnsupportedMediaType)
		return false
	}
	return true
}

// backfillFailed answers a call Run refused or did not take.
func backfillFailed(w http.ResponseWriter, err error) {
	var be *pgcdc.BackfillError
	switch {
	case errors.As(err, &be):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, pgcdc.ErrBackfillNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		http.Error(w, err.Error()+" (the program takes backfill calls while it streams: see /status)", http.StatusServiceUnavailable)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// logBackfills logs the progress of each unfinished backfill, a record
// each, beside the progress record.
func logBackfills(logger *slog.Logger, ps []pgcdc.BackfillProgress) {
	for _, p := range ps {
		logger.Info("backfill progress", "backfill", p.ID, "table", p.Table, "rows", p.Rows, "chunks", p.Chunks, "last_key", p.LastKey,
			"rows_left", p.RowsLeft, "rows_per_second", int64(p.RowsPerSecond+0.5), "paused", p.Paused)
	}
}

// backfillsLine is what the progress line says of the unfinished
// backfills: for each, its table, rows, the estimate of the rows left
// when known, and its rate or that it is paused.
func backfillsLine(ps []pgcdc.BackfillProgress) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "; backfill %s %d rows", p.Table, p.Rows)
		if p.RowsLeft >= 0 {
			fmt.Fprintf(&b, " (~%d left)", p.RowsLeft)
		}
		if p.Paused {
			b.WriteString(" paused")
		} else {
			fmt.Fprintf(&b, " %d/s", int64(p.RowsPerSecond+0.5))
		}
	}
	return b.String()
}

const backfillUsage = `Usage:
  kafkasink backfill [-http-addr ADDR] -table schema.table [-where CONDITION]
  kafkasink backfill [-http-addr ADDR] list
  kafkasink backfill [-http-addr ADDR] pause|resume|cancel ID

Asks the kafkasink instance whose HTTP listener is at -http-addr for a
backfill of a table, or of the rows CONDITION (SQL over its published
columns) matches, while it streams; lists its unfinished backfills with
their progress; or pauses, resumes or cancels one by its ID. It prints the
instance's answer, JSON. Exit status: 0 done, 1 refused or not reached, 2
a usage error.

Flags:
`

// backfillCommand is the backfill command: it calls a running instance's
// backfill endpoints and prints the answer to stdout.
func backfillCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kafkasink backfill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, backfillUsage)
		fs.PrintDefaults()
	}
	addr := fs.String("http-addr", getenv("KAFKASINK_HTTP_ADDR"), "the running instance's -http-addr, such as 127.0.0.1:9187 ($KAFKASINK_HTTP_ADDR)")
	table := fs.String("table", "", "the table to backfill, schema.table as in -tables")
	where := fs.String("where", "", "backfill only the rows this SQL condition over the table's published columns matches, such as \"region = 'eu'\"")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the answer")
	// Flags may come before and after the action and its ID.
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		words, args = append(words, args[0]), args[1:]
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "kafkasink backfill: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run kafkasink backfill -h for the usage.")
		return 2
	}
	if *addr == "" {
		return usage("set -http-addr (or $KAFKASINK_HTTP_ADDR) to the running instance's -http-addr, such as 127.0.0.1:9187")
	}
	method, path, body := http.MethodPost, "/backfills", []byte(nil)
	switch {
	case len(words) == 0:
		if *table == "" {
			return usage("name the table to backfill with -table schema.table, or give list, pause, resume or cancel")
		}
		body, _ = json.Marshal(backfillRequestDoc{Table: *table, Where: *where})
	case *table != "" || *where != "":
		return usage("-table and -where ask for a new backfill: leave them out with %s", words[0])
	case words[0] == "list" && len(words) == 1:
		method = http.MethodGet
	case words[0] == "list":
		return usage("list takes no ID, but got %q", words[1:])
	case words[0] == "pause" || words[0] == "resume" || words[0] == "cancel":
		if len(words) != 2 {
			return usage("%s takes one backfill ID (kafkasink backfill list shows them), but got %d", words[0], len(words)-1)
		}
		path = "/backfills/" + url.PathEscape(words[1]) + "/" + words[0]
	default:
		return usage("unknown action %q: want list, pause, resume or cancel, or -table for a new backfill", words[0])
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+*addr+path, bytes.NewReader(body))
	if err != nil {
		return usage("-http-addr %q: %v", *addr, err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "kafkasink backfill: %v: is kafkasink running with -http-addr %s?\n", err, *addr)
		return 1
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintf(stderr, "kafkasink backfill: reading the answer: %v\n", err)
		return 1
	}
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "kafkasink backfill: %s: %s\n", resp.Status, strings.TrimSpace(string(answer)))
		return 1
	}
	stdout.Write(answer)
	return 0
}
