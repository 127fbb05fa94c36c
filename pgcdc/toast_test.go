package pgcdc

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestKeyChangeKeepsUnchangedTOAST updates the key of a row whose TOASTed
// column the update does not touch. With REPLICA IDENTITY FULL every
// encoder's record under the new key must hold the value the database
// holds; with DEFAULT the value cannot be known, so the upsert document
// must say it is partial, and Run must have warned about the table at
// start-up.
func TestKeyChangeKeepsUnchangedTOAST(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	full, dflt, small := e.name+"_full", e.name+"_dflt", e.name+"_small"
	for _, tb := range []string{full, dflt} {
		e.exec("CREATE TABLE " + tb + " (id int PRIMARY KEY, note text, big text)")
		// Out of line and uncompressed, so an update that does not touch
		// it sends it as an unchanged TOAST value.
		e.exec("ALTER TABLE " + tb + " ALTER COLUMN big SET STORAGE EXTERNAL")
	}
	e.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	e.exec("CREATE TABLE " + small + " (id int PRIMARY KEY, n int, t timestamptz)") // nothing TOASTable
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + full + ", " + dflt + ", " + small)

	logs := newLogRecorder(t)
	cfg := e.config()
	cfg.CreatePublication = false
	cfg.Logger = slog.New(logs)
	_, done := start(t, cfg, e.newEncoderSinks())
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })
	for _, tb := range []string{full, dflt} {
		e.exec("INSERT INTO " + tb + " VALUES (1, 'new', repeat('x', 3000) || 'end')")
		e.exec("UPDATE " + tb + " SET id = 2 WHERE id = 1") // the key changes, big does not
		e.exec("UPDATE " + tb + " SET note = 'upd'")        // big does not change
	}

	var big string
	e.mu.Lock()
	err := e.db.QueryRow(context.Background(), "SELECT big FROM "+full+" WHERE id = 2").Scan(&big)
	e.mu.Unlock()
	if err != nil || !strings.HasSuffix(big, "end") {
		t.Fatalf("the database holds big of %d bytes (%v)", len(big), err)
	}

	// recordKey is where values puts a record's Kafka key.
	const recordKey = "\x00key"
	// Per table and encoder, the values of the records in topic order
	// (one partition); insert, delete + insert of the key change, update.
	values := func(prefix, table string, min int) []map[string]any {
		var out []map[string]any
		waitFor(t, 30*time.Second, prefix+" records of "+table, done, func() bool {
			out = out[:0]
			for _, r := range sinktest.ReadCommitted(t, e.brokers, prefix+".public."+table) {
				var v map[string]any
				if r.Value != nil {
					if err := json.Unmarshal(r.Value, &v); err != nil {
						t.Fatal(err)
					}
				}
				if v != nil {
					v[recordKey] = string(r.Key)
				}
				out = append(out, v)
			}
			return len(out) >= min
		})
		return out
	}
	// The DEFAULT table's changes come last, and the Debezium sink is
	// written last: once they are there, everything is.
	values("debezium", dflt, 4)
	// The row image a record carries, and whether it is the row under key 2.
	image := func(prefix string, v map[string]any) map[string]any {
		switch prefix {
		case "upsert":
			if v == nil {
				return nil // a tombstone
			}
			d, _ := v["document"].(map[string]any)
			return d
		default:
			a, _ := v["after"].(map[string]any)
			return a
		}
	}
	for _, prefix := range encoderPrefixes {
		recs := values(prefix, full, 1)
		n := 0
		for _, v := range recs {
			if img := image(prefix, v); img != nil && img["id"] == 2.0 {
				n++
				if v[recordKey] != "2" {
					t.Errorf("%s, FULL: a record of the row with id 2 has key %q, want the primary key 2", prefix, v[recordKey])
				}
				if img["big"] != big {
					t.Errorf("%s, FULL: a record under the new key has big %.20q..., the database %d bytes", prefix, img["big"], len(big))
				}
				if prefix == "upsert" && v["operation"] != "upsert" {
					t.Errorf("upsert, FULL: operation %v for a whole row, want upsert", v["operation"])
				}
			}
		}
		if n != 2 {
			t.Errorf("%s, FULL: %d records under the new key, want 2 (the key change's insert, the update)", prefix, n)
		}
	}
	partial := 0
	for _, v := range values("upsert", dflt, 1) {
		img := image("upsert", v)
		if img == nil || img["id"] != 2.0 {
			continue
		}
		partial++
		md, _ := v["metadata"].(map[string]any)
		if _, has := img["big"]; has || v["operation"] != "partial" || !slices.Equal(md["unchanged"].([]any), []any{"big"}) {
			t.Errorf("upsert, DEFAULT: a document without the value of big must be operation partial with unchanged [big]: %v", v)
		}
	}
	if partial != 2 {
		t.Errorf("upsert, DEFAULT: %d documents under the new key, want 2", partial)
	}

	warned := logs.find("published tables without REPLICA IDENTITY FULL")
	if len(warned) != 1 {
		t.Fatalf("%d start-up warnings about TOASTable tables, want 1", len(warned))
	}
	listed := warned[0]["tables"]
	if !strings.Contains(listed, dflt) || strings.Contains(listed, full) || strings.Contains(listed, small) {
		t.Errorf("the warning lists %s; want %s and neither %s (FULL) nor %s (nothing TOASTable)", listed, dflt, full, small)
	}
}
