package pgcdc

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOutputSettingsPinned runs the pipeline as a role whose own settings
// (ALTER ROLE ... SET) and connection string ask the server to print
// values differently from what the conversions parse, and checks that the
// snapshot (ordinary connection) and the stream (replication connection)
// both deliver the values the database holds.
func TestOutputSettingsPinned(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.name + "_settings"
	e.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, f8 float8, iv interval, d date, tstz timestamptz, by bytea, t text)")
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table)

	// A role of the test's own, so the shared role's settings stay as
	// they are. It may do anything the test's role may.
	role := e.name + "_role"
	e.exec("CREATE ROLE " + role + " LOGIN SUPERUSER PASSWORD 'settings'")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.db.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		for ctx.Err() == nil {
			if _, err := e.db.Exec(ctx, "DROP ROLE IF EXISTS "+role); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	for _, set := range []string{
		"DateStyle = 'SQL, DMY'",   // dates the parser refuses
		"extra_float_digits = 0",   // rounded floats
		"client_encoding = LATIN1", // text that is not UTF-8
		"TimeZone = 'Asia/Kathmandu'",
		"bytea_output = escape",
		"IntervalStyle = sql_standard",
	} {
		e.exec("ALTER ROLE " + role + " SET " + set)
	}
	u, err := url.Parse(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "settings")
	q := u.Query()
	// The connection string may set them too, in any spelling; it wins
	// over the role's settings, and pgcdc's win over both.
	q.Set("intervalstyle", "iso_8601")
	q.Set("options", "-c extra_float_digits=-15")
	// url.Values writes a space as '+', which libpq's URL syntax does not
	// read as a space.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")

	insert := func(id int) {
		e.exec("INSERT INTO "+table+" VALUES ($1, 0.1::float8 + 0.2::float8, '1 year 2 mons 3 days 04:05:06.5', '2024-02-29', '2024-02-29 13:14:15.5+01', '\\x00ff5c80', 'Grüße \\ |')", id)
	}
	insert(1) // read by the snapshot
	cfg := e.config()
	cfg.ConnString = u.String()
	cfg.CreatePublication = false
	cfg.Snapshot = true
	sink := e.newSink(e.name)
	_, done := start(t, cfg, sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	insert(2) // streamed

	var recs []record
	waitFor(t, 30*time.Second, "both rows in the topic", done, func() bool {
		recs = e.readTopic(table)
		return len(recs) == 2
	})
	slices.SortFunc(recs, func(a, b record) int { return a.Position.Compare(b.Position) })

	// What the database holds, read on the test's connection with the
	// server's default settings.
	var (
		f8         float64
		iv, d, txt string
		tstz       time.Time
		by         []byte
	)
	e.mu.Lock()
	err = e.db.QueryRow(context.Background(), "SELECT f8, iv::text, d::text, tstz, by, t FROM "+table+" WHERE id = 1").Scan(&f8, &iv, &d, &tstz, &by, &txt)
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if f8 != 0.30000000000000004 || iv != "1 year 2 mons 3 days 04:05:06.5" || d != "2024-02-29" || txt != "Grüße \\ |" {
		t.Fatalf("the database holds f8=%v iv=%q d=%q t=%q: the test's own connection is not at the server's defaults", f8, iv, d, txt)
	}
	for _, r := range recs {
		what := r.Op + " of row " + r.ID
		check := func(col string, got, want any) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %s is %#v in Kafka, %#v in the database", what, col, got, want)
			}
		}
		check("f8", r.After["f8"], f8)
		check("iv", r.After["iv"], iv)
		check("d", r.After["d"], d)
		check("t", r.After["t"], txt)
		check("by", r.After["by"], base64.StdEncoding.EncodeToString(by))
		if s, _ := r.After["tstz"].(string); s != tstz.UTC().Format(time.RFC3339Nano) {
			t.Errorf("%s: tstz is %q in Kafka, %s in the database", what, s, tstz.UTC().Format(time.RFC3339Nano))
		}
	}
	if recs[0].Op != "read" || recs[1].Op != "insert" {
		t.Errorf("ops %s, %s: want read (snapshot), insert (stream)", recs[0].Op, recs[1].Op)
	}
}
