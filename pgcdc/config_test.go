package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func validConfig() Config {
	return Config{ConnString: "postgres://u:secret@localhost:5432/db", Slot: "s1", Publication: "p1"}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := validConfig().withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"SnapshotChunkRows", cfg.SnapshotChunkRows, DefaultSnapshotChunkRows},
		{"BatchMaxEvents", cfg.BatchMaxEvents, DefaultBatchMaxEvents},
		{"BatchMaxBytes", cfg.BatchMaxBytes, DefaultBatchMaxBytes},
		{"BatchMaxWait", cfg.BatchMaxWait, time.Duration(0)},
		{"StandbyInterval", cfg.StandbyInterval, DefaultStandbyInterval},
		{"HeartbeatInterval", cfg.HeartbeatInterval, DefaultHeartbeatInterval},
		{"ReconnectBackoff", cfg.ReconnectBackoff, DefaultReconnectBackoff},
		{"ReconnectMax", cfg.ReconnectMax, DefaultReconnectMax},
		{"Logger", cfg.Logger != nil, true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	neg := validConfig()
	neg.HeartbeatInterval = -1
	if got := neg.withDefaults().HeartbeatInterval; got >= 0 {
		t.Errorf("negative HeartbeatInterval became %v; it must stay negative (disabled)", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string // parts of the error; nil means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"tables", func(c *Config) { c.Tables = []string{"public.a", "b", "s.c"} }, nil},
		{"no conn string", func(c *Config) { c.ConnString = "" }, []string{"Config.ConnString is required"}},
		{"bad conn string", func(c *Config) { c.ConnString = "postgres://u:secret@host:notaport/db" }, []string{"Config.ConnString does not parse"}},
		{"no slot", func(c *Config) { c.Slot = "" }, []string{"Config.Slot is required"}},
		{"bad slot", func(c *Config) { c.Slot = "My-Slot" }, []string{`Config.Slot "My-Slot" is not a valid replication slot name`}},
		{"long slot", func(c *Config) { c.Slot = strings.Repeat("s", 64) }, []string{"not a valid replication slot name"}},
		{"no publication", func(c *Config) { c.Publication = "" }, []string{"Config.Publication is required"}},
		{"long publication", func(c *Config) { c.Publication = strings.Repeat("p", 64) }, []string{"longer than 63 bytes"}},
		{"bad table", func(c *Config) { c.Tables = []string{"a.b.c", ".x"} }, []string{`table name "a.b.c" has 3 dot-separated parts`, `table name ".x": a part is empty`}},
		{"bad slot gap", func(c *Config) { c.SlotGap = 7 }, []string{"Config.SlotGap 7 is not a SlotGap"}},
		{"bad key columns", func(c *Config) { c.KeyColumns = kafkasink.TableKeys{"orders": {"id"}, "s.t": nil} },
			[]string{`pgcdc: Config.KeyColumns key: table name "orders" has no schema`, `pgcdc: Config.KeyColumns["s.t"] needs at least one non-empty column name`}},
		{"negative sizes", func(c *Config) { c.BatchMaxEvents, c.BatchMaxBytes, c.SnapshotChunkRows = -1, -2, -3 },
			[]string{"BatchMaxEvents -1 is negative", "BatchMaxBytes -2 is negative", "SnapshotChunkRows -3 is negative"}},
		{"negative durations", func(c *Config) { c.BatchMaxWait, c.StandbyInterval = -time.Second, -time.Second },
			[]string{"BatchMaxWait -1s is negative", "StandbyInterval -1s is negative"}},
		{"backoff above max", func(c *Config) { c.ReconnectBackoff, c.ReconnectMax = time.Minute, time.Second },
			[]string{"ReconnectBackoff 1m0s exceeds Config.ReconnectMax 1s"}},
		{"everything at once", func(c *Config) { *c = Config{BatchMaxEvents: -1} },
			[]string{"ConnString is required", "Slot is required", "Publication is required", "BatchMaxEvents -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tc.mod(&cfg)
			cfg = cfg.withDefaults()
			err := cfg.validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("validate = %v, want nil", err)
				}
				return
			}
			var ce *kafkasink.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("validate = %v, want a *kafkasink.ConfigError", err)
			}
			if len(ce.Problems) != len(tc.want) {
				t.Errorf("%d problems %q, want %d", len(ce.Problems), ce.Problems, len(tc.want))
			}
			if !containsAll(err.Error(), tc.want...) {
				t.Errorf("validate = %q, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %q", err)
			}
		})
	}
}

func TestRunRefusesBadConfigBeforeConnecting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := Run(ctx, Config{Slot: "BAD"}, nil)
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !kafkasink.IsFatal(err) {
		t.Fatalf("Run = %v, want a fatal *kafkasink.ConfigError", err)
	}
	if !containsAll(err.Error(), "ConnString is required", `Slot "BAD"`, "Publication is required", "sink argument is nil") {
		t.Errorf("Run = %q, want every problem listed", err)
	}
}

func TestWALLevelError(t *testing.T) {
	t.Parallel()
	err := walLevelError("replica")
	if !kafkasink.IsFatal(err) || retryable(err) {
		t.Errorf("walLevelError is not fatal: IsFatal %v, retryable %v", kafkasink.IsFatal(err), retryable(err))
	}
	want := []string{`wal_level is "replica"`, "wal_level = logical", "ALTER SYSTEM SET wal_level = logical", "restart PostgreSQL", "rds.logical_replication"}
	if !containsAll(err.Error(), want...) {
		t.Errorf("walLevelError = %q, want it to contain %q", err, want)
	}
}

func TestReplicationConfig(t *testing.T) {
	t.Parallel()
	cfg := Config{ConnString: "postgres://u:p@localhost:5432/db?replication=database&application_name=app"}
	cc, err := cfg.connConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cc.RuntimeParams["replication"]; ok {
		t.Error("the ordinary connection keeps replication=database")
	}
	rc, err := cfg.replicationConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rc.RuntimeParams["replication"] != "database" || rc.RuntimeParams["application_name"] != "app" {
		t.Errorf("replication connection parameters %v, want replication=database and the given application_name", rc.RuntimeParams)
	}
	cfg.ConnString = "host=localhost dbname=db user=u"
	if rc, err = cfg.replicationConfig(context.Background()); err != nil || rc.RuntimeParams["replication"] != "database" {
		t.Errorf("keyword/value conn string: %v, %v", rc.RuntimeParams, err)
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	wrap := func(err error) error { return fmt.Errorf("pgcdc: outer: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"terminated walsender", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"starting up", pg("57P03"), true},
		{"slot active for another pid", wrap(pg("55006")), true},
		{"too many connections", pg("53300"), true},
		{"connection failure", pg("08006"), true},
		{"eof", wrap(io.ErrUnexpectedEOF), true},
		{"refused", wrap(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{"stream ended", wrap(errStreamEnded), true},
		{"insufficient privilege", pg("42501"), false},
		{"bad password", wrap(pg("28P01")), false},
		{"slot missing at start", pg("42704"), false},
		{"decode error", wrap(&DecodeError{Err: errors.New("bad")}), false},
		{"config error", walLevelError("minimal"), false},
		{"slot lost", wrap(ErrSlotLost), false},
		{"source refused", wrap(&SourceError{Kind: SourceSlotMissing}), false},
		{"fenced sink", wrap(kafkasink.ErrFenced), false},
		{"sink error", &sinkError{&kafkasink.RejectedError{}}, false},
		{"rejected", &kafkasink.RejectedError{}, false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestSplitTable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a": "public|a", "s.a": "s|a", "": "", "s.": "", ".a": "", "a.b.c": "",
		`public."a.b"`: "public|a.b", `"a.b".c`: "a.b|c", `a."b.c"`: "a|b.c", `"a.b"`: "public|a.b",
		`"Say ""hi"""."x y"`: `Say "hi"|x y`, `"s".t`: "s|t", `Mixed.Case`: "Mixed|Case",
		`"a`: "", `a"b.c`: "", `"a"b.c`: "", `""."t"`: "", ` s.t`: "",
	} {
		s, tb, err := splitTable(in)
		got := s + "|" + tb
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("splitTable(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestOutputSettingsReplaceEverySpelling checks that a setting the
// connection string gives in another spelling is replaced, not sent
// alongside pgcdc's: the server would take whichever came last.
func TestOutputSettingsReplaceEverySpelling(t *testing.T) {
	t.Parallel()
	cfg := Config{ConnString: "postgres://u:p@localhost:5432/db?datestyle=SQL&TIMEZONE=Asia/Tokyo&search_path=app"}
	cc, err := cfg.connConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfg.replicationConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, params := range map[string]map[string]string{"ordinary": cc.RuntimeParams, "replication": rc.RuntimeParams} {
		for _, s := range outputSettings {
			if params[s.name] != s.value {
				t.Errorf("%s connection: %s = %q, want %q", name, s.name, params[s.name], s.value)
			}
		}
		for _, k := range []string{"datestyle", "TIMEZONE"} {
			if _, ok := params[k]; ok {
				t.Errorf("%s connection: the connection string's %s is still sent", name, k)
			}
		}
		if params["search_path"] != "app" {
			t.Errorf("%s connection: search_path = %q, want the connection string's app", name, params["search_path"])
		}
	}
}

// A database that never answers: when ctx ends, Run's error says why the
// attempts failed, not only that the context ended.
func TestRunReportsLastConnectionError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every attempt is refused
	_, brokers := sinktest.Cluster(t)
	sink, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: brokers, SinkID: "unreachable-db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = Run(ctx, Config{ConnString: "postgres://u:p@" + addr + "/db?connect_timeout=1", Slot: "s", Publication: "p",
		ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, HeartbeatInterval: -1}, sink)
	if !errors.Is(err, context.DeadlineExceeded) || !containsAll(err.Error(), "the last attempt failed", addr, "connect") {
		t.Fatalf("Run = %v, want context.DeadlineExceeded with the last connection error, naming %s", err, addr)
	}
}

// What a person must fix stops Run at once, with the server's reason: a
// wrong password and a database that does not exist.
func TestRunFailsFastOnWhatAPersonMustFix(t *testing.T) {
	e := newPGEnv(t)
	for name, tc := range map[string]struct {
		edit func(u *url.URL)
		want string
	}{
		"wrong password":   {func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "wrong-password") }, "28P01"},
		"unknown database": {func(u *url.URL) { u.Path = "/no_such_database_" + e.name }, "3D000"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(e.conn)
			if err != nil {
				t.Fatalf("KAFKASINK_TEST_PG must be a postgres:// URL here: %v", err)
			}
			tc.edit(u)
			cfg := e.config()
			cfg.ConnString = u.String()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = Run(ctx, cfg, e.newSink(e.name))
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v (context: %v), want it to stop at once with SQLSTATE %s", err, ctx.Err(), tc.want)
			}
		})
	}
}

// ConfigureConn sees every connection Run opens, ordinary and replication
// ones, and what it sets is used: here the password, which the connection
// string has wrong (as when a token is fetched per connection). It cannot
// take away what Run depends on: its attempt to drop replication=database
// is undone (without it the slot could not stream).
func TestConfigureConn(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	u, err := url.Parse(e.conn)
	if err != nil {
		t.Fatalf("KAFKASINK_TEST_PG must be a postgres:// URL here: %v", err)
	}
	password, _ := u.User.Password()
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	cfg := e.config("public." + table)
	cfg.ConnString = u.String()
	var ordinary, replication atomic.Int64
	cfg.ConfigureConn = func(ctx context.Context, c *pgconn.Config) error {
		if c.RuntimeParams["replication"] == "database" {
			replication.Add(1)
		} else {
			ordinary.Add(1)
		}
		c.Password = password
		delete(c.RuntimeParams, "replication")
		return nil
	}
	tr := newTracker()
	stop, done := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	waitFor(t, 20*time.Second, "streaming", done, e.streaming)
	e.exec("INSERT INTO " + table + " (id, seq, note) VALUES (1, 1, 'a')")
	waitFor(t, 20*time.Second, "the insert to be written", done, func() bool { return !tr.written().IsZero() })
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if ordinary.Load() == 0 || replication.Load() == 0 {
		t.Errorf("ConfigureConn saw %d ordinary and %d replication connections, want both kinds", ordinary.Load(), replication.Load())
	}
}
